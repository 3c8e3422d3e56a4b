// Optimizer::create/step (checks and state bookkeeping) and the SGD and Adam
// updates over flat float buffers; the per-element math is in update_math.h.
#include "executor/optim/optimizer.h"

#include <xmmintrin.h>

#include <cassert>
#include <cmath>
#include <set>

#include "executor/cpu/kernels/cpu_threads.h"
#include "executor/optim/update_math.h"
#include "ir/error.h"

namespace pipetrain::exec {

namespace {

std::string what(const std::string& kind) {
  return "optimizer '" + kind + "'";
}

// The state value `name` for a param of `shape`: created as zeros, or checked if present.
void ensure_state(ir::Graph& g, const std::string& name, ir::DType dtype, const ir::Shape& shape,
                  const std::string& param) {
  if (const ir::Tensor* v = g.value(name)) {
    if (v->dtype() != dtype || v->shape() != shape)
      throw ModelError("optimizer state '" + name + "' is " + ir::dtype_name(v->dtype()) + " " +
                       ir::shape_str(v->shape()) + " but param '" + param + "' needs " +
                       ir::dtype_name(dtype) + " " + ir::shape_str(shape));
    if (g.tensor(name).role != ir::Role::kOptimizerState)
      throw ModelError("optimizer state '" + name + "' clashes with a " +
                       ir::role_name(g.tensor(name).role) + " of that name");
    return;
  }
  if (g.has_tensor(name))
    throw ModelError("optimizer state '" + name + "' clashes with a tensor of that name");
  g.set_value(name, ir::Tensor(dtype, shape), ir::Role::kOptimizerState);
}

float* state_data(ir::Graph& g, const std::string& name) {
  ir::Tensor* t = g.mutable_value(name);
  if (!t) throw ModelError("optimizer state '" + name + "' is missing from the graph");
  return t->data<float>();
}

// Adam's moments decay towards zero and sink into float32's denormal range,
// where x86 arithmetic takes a microcode assist per operation: the demo's
// LeNet update ran 10x slower after an epoch. Values that small cannot move a
// weight (sqrt(v) far below eps, m / denom far below an ulp of p), so the
// update flushes them to zero (MXCSR's FTZ and DAZ, restored after).
class FlushDenormals {
 public:
  FlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
  ~FlushDenormals() { _mm_setcsr(saved_); }
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

 private:
  unsigned saved_;
};

/// Runs update(begin, end) over [0, n) split over threads (parallel_for),
/// denormals flushed on every thread that runs a part (MXCSR is per thread).
template <typename F>
void for_each_part(int64_t n, F update) {
  exec::cpu::parallel_for(n, n * 8, [&](int64_t begin, int64_t end) {
    const FlushDenormals flush;
    update(begin, end);
  });
}

/// body(w, i) updates param i of [begin, end), read from p_in and written
/// to p_out, the state read into locals. Written so that GCC vectorizes it:
/// the scalars captured by value (a store through a state pointer could
/// alias a captured struct, whose fields were then reloaded every element)
/// and an update in place through one pointer (with p_in == p_out the
/// vectorizer's overlap check failed and the scalar loop ran: Zen 4, SGD
/// with momentum over 11.7 M params 20-30 ms a step, now 7-10). The same
/// operations in the same order, so the same bits.
template <typename Body>
inline void update_part(const float* p_in, float* p_out, int64_t begin, int64_t end, Body body) {
  if (p_in == p_out) {
    for (int64_t i = begin; i < end; ++i) {
      float w = p_out[i];
      body(w, i);
      p_out[i] = w;
    }
  } else {
    for (int64_t i = begin; i < end; ++i) {
      float w = p_in[i];
      body(w, i);
      p_out[i] = w;
    }
  }
}

class Sgd final : public Optimizer {
 public:
  using Optimizer::Optimizer;
  void update(ir::Graph& g, const std::string& param, const float* p_in, float* p_out,
              const float* grad, float grad_scale, int64_t n, int64_t t, double lr) override {
    optim::SgdScalars s{};
    s.neg_lr = static_cast<float>(-lr);
    s.weight_decay = static_cast<float>(config_.weight_decay);
    s.momentum = static_cast<float>(config_.momentum);
    s.one_minus_damp = static_cast<float>(1.0 - config_.dampening);
    s.nesterov = config_.nesterov;
    s.first_step = t == 1;
    float* buf = config_.momentum != 0 ? state_data(g, param + ".momentum") : nullptr;  // (n)
    for_each_part(n, [&, s](int64_t begin, int64_t end) {
      if (buf)
        update_part(p_in, p_out, begin, end, [&, s](float& w, int64_t i) {
          float b = buf[i];
          optim::sgd_update(w, grad[i] * grad_scale, b, s);
          buf[i] = b;
        });
      else
        update_part(p_in, p_out, begin, end, [&, s](float& w, int64_t i) {
          float unused = 0;
          optim::sgd_update(w, grad[i] * grad_scale, unused, s);
        });
    });
  }
};

class Adam final : public Optimizer {
 public:
  Adam(OptimizerConfig c, std::vector<std::string> p, bool decoupled)
      : Optimizer(std::move(c), std::move(p)), decoupled_(decoupled) {}
  void update(ir::Graph& g, const std::string& param, const float* p_in, float* p_out,
              const float* grad, float grad_scale, int64_t n, int64_t t, double lr) override {
    // Bias corrections in double, as torch computes them from Python floats.
    const double bias1 = 1.0 - std::pow(config_.beta1, static_cast<double>(t));
    const double bias2 = 1.0 - std::pow(config_.beta2, static_cast<double>(t));
    optim::AdamScalars s{};
    s.beta1 = static_cast<float>(config_.beta1);
    s.one_minus_beta1 = static_cast<float>(1.0 - config_.beta1);
    s.beta2 = static_cast<float>(config_.beta2);
    s.one_minus_beta2 = static_cast<float>(1.0 - config_.beta2);
    s.neg_step_size = static_cast<float>(-(lr / bias1));
    s.bias2_sqrt = static_cast<float>(std::sqrt(bias2));
    s.eps = static_cast<float>(config_.eps);
    s.l2_decay = decoupled_ ? 0.0f : static_cast<float>(config_.weight_decay);
    s.decoupled_factor = decoupled_ ? static_cast<float>(1.0 - lr * config_.weight_decay) : 1.0f;
    s.amsgrad = config_.amsgrad;
    float* m = state_data(g, param + ".exp_avg");                                        // (n)
    float* v = state_data(g, param + ".exp_avg_sq");                                     // (n)
    float* vmax = config_.amsgrad ? state_data(g, param + ".max_exp_avg_sq") : nullptr;  // (n)
    for_each_part(n, [&, s](int64_t begin, int64_t end) {
      if (vmax)
        update_part(p_in, p_out, begin, end, [&, s](float& w, int64_t i) {
          float mi = m[i], vi = v[i], vm = vmax[i];
          optim::adam_update(w, grad[i] * grad_scale, mi, vi, vm, s);
          m[i] = mi, v[i] = vi, vmax[i] = vm;
        });
      else
        update_part(p_in, p_out, begin, end, [&, s](float& w, int64_t i) {
          float mi = m[i], vi = v[i], unused = 0;
          optim::adam_update(w, grad[i] * grad_scale, mi, vi, unused, s);
          m[i] = mi, v[i] = vi;
        });
    });
  }

 private:
  bool decoupled_;
};

void validate(const OptimizerConfig& c) {
  const std::string w = what(c.kind);
  if (c.kind != "sgd" && c.kind != "adam" && c.kind != "adamw")
    throw ModelError("unknown optimizer '" + c.kind + "' (sgd, adam, adamw)");
  auto check = [&](bool ok, const std::string& msg) {
    if (!ok) throw ModelError(w + ": " + msg);
  };
  check(c.lr >= 0, "lr must be >= 0, got " + std::to_string(c.lr));
  check(c.weight_decay >= 0, "weight_decay must be >= 0, got " + std::to_string(c.weight_decay));
  if (c.kind == "sgd") {
    check(c.momentum >= 0, "momentum must be >= 0, got " + std::to_string(c.momentum));
    check(!c.nesterov || (c.momentum > 0 && c.dampening == 0),
          "nesterov needs momentum > 0 and dampening 0");
  } else {
    check(c.beta1 >= 0 && c.beta1 < 1, "beta1 must be in [0, 1), got " + std::to_string(c.beta1));
    check(c.beta2 >= 0 && c.beta2 < 1, "beta2 must be in [0, 1), got " + std::to_string(c.beta2));
    check(c.eps >= 0, "eps must be >= 0, got " + std::to_string(c.eps));
  }
}

}  // namespace

std::unique_ptr<Optimizer> Optimizer::create(const OptimizerConfig& config, ir::Graph& g,
                                             const std::vector<std::string>& params) {
  validate(config);
  const std::string w = what(config.kind);
  if (params.empty()) throw ModelError(w + ": no parameters to optimize");
  std::set<std::string> seen;
  for (const std::string& p : params) {
    if (!seen.insert(p).second) throw ModelError(w + ": param '" + p + "' is listed twice");
    const ir::Tensor* v = g.value(p);
    if (!v) throw ModelError(w + ": param '" + p + "' has no value in graph '" + g.name + "'");
    if (g.tensor(p).role != ir::Role::kParam)
      throw ModelError(w + ": '" + p + "' is a " + ir::role_name(g.tensor(p).role) +
                       ", not a trainable param");
    if (v->dtype() != ir::DType::kF32)
      throw ModelError(w + ": param '" + p + "' is " + ir::dtype_name(v->dtype()) +
                       "; only f32 params are trained");
  }
  std::unique_ptr<Optimizer> opt;
  if (config.kind == "sgd") {
    opt.reset(new Sgd(config, params));
  } else {
    opt.reset(new Adam(config, params, config.kind == "adamw"));
  }
  for (const std::string& p : params) {
    const ir::Shape shape = g.value(p)->shape();
    for (const std::string& s : opt->state_names(p))
      ensure_state(g, s, s == p + ".step" ? ir::DType::kI64 : ir::DType::kF32,
                   s == p + ".step" ? ir::Shape{} : shape, p);
  }
  return opt;
}

std::vector<std::string> Optimizer::state_names(const std::string& param) const {
  std::vector<std::string> names = {param + ".step"};
  if (config_.kind == "sgd") {
    if (config_.momentum != 0) names.push_back(param + ".momentum");
  } else {
    names.push_back(param + ".exp_avg");
    names.push_back(param + ".exp_avg_sq");
    if (config_.amsgrad) names.push_back(param + ".max_exp_avg_sq");
  }
  return names;
}

void Optimizer::step(ir::Graph& g, const std::map<std::string, ir::Tensor>& grads, double lr,
                     const std::map<std::string, ir::Tensor>* into, double grad_scale) {
  const FlushDenormals flush;
  const float gs = static_cast<float>(grad_scale);  // x * 1.0f == x: no scale, same bits
  for (const std::string& name : params_) {
    auto it = grads.find(name);
    if (it == grads.end()) continue;
    ir::Tensor* p = g.mutable_value(name);
    if (!p)
      throw ModelError(what(config_.kind) + ": param '" + name + "' is missing from the graph");
    const ir::Tensor& grad = it->second;
    if (grad.dtype() != ir::DType::kF32 || grad.shape() != p->shape())
      throw ModelError(what(config_.kind) + ": gradient of '" + name + "' is " +
                       ir::dtype_name(grad.dtype()) + " " + ir::shape_str(grad.shape()) +
                       ", the param is f32 " + ir::shape_str(p->shape()));
    ir::Tensor* steps = g.mutable_value(name + ".step");
    if (!steps || steps->dtype() != ir::DType::kI64)
      throw ModelError(what(config_.kind) + ": state '" + name +
                       ".step' is missing from the graph");
    const int64_t t = ++steps->data<int64_t>()[0];
    auto out = into ? into->find(name) : std::map<std::string, ir::Tensor>::const_iterator{};
    if (into && out != into->end() && out->second.dtype() == ir::DType::kF32 &&
        out->second.shape() == p->shape()) {
      ir::Tensor dst = out->second;  // a handle on the caller's buffer
      update(g, name, p->data<float>(), dst.data<float>(), grad.data<float>(), gs, p->numel(), t,
             lr);
      g.set_value(name, dst, ir::Role::kParam);
    } else {
      update(g, name, p->data<float>(), p->data<float>(), grad.data<float>(), gs, p->numel(), t,
             lr);
    }
  }
}

double sum_of_squares(const ir::Tensor& g) {
  // Eight running sums (element i goes to sum i mod 8), added in a fixed
  // order at the end: deterministic, and no single dependency chain.
  const float* d = g.data<float>();
  const int64_t n = g.numel();
  double part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) part[k] += static_cast<double>(d[i + k]) * d[i + k];
  for (; i < n; ++i) part[i % 8] += static_cast<double>(d[i]) * d[i];
  double sum = 0;
  for (double x : part) sum += x;
  return sum;
}

double clip_grad_norm(std::map<std::string, ir::Tensor>& grads, double max_norm) {
  if (!(max_norm > 0)) throw ModelError("clip_grad_norm: max_norm must be > 0");
  // total = sqrt(sum over tensors of sum over elements g^2), in double and name order.
  double sum_sq = 0;
  for (const auto& [name, g] : grads) {
    if (g.dtype() != ir::DType::kF32)
      throw ModelError("clip_grad_norm: gradient '" + name + "' is " + ir::dtype_name(g.dtype()) +
                       ", expected f32");
    sum_sq += sum_of_squares(g);
  }
  const double total = std::sqrt(sum_sq);
  if (!std::isfinite(total)) return total;
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) {
    const float c = static_cast<float>(coef);
    for (auto& [name, g] : grads) {
      // Gradients may share buffers with other tensors; scaling in place is the contract.
      float* d = g.data<float>();
      for (int64_t i = 0, n = g.numel(); i < n; ++i) d[i] *= c;
    }
  }
  return total;
}

bool all_finite(const ir::Tensor& t) {
  const uint32_t* bits = static_cast<const uint32_t*>(t.raw());
  uint32_t bad = 0;
  for (int64_t i = 0, n = t.numel(); i < n; ++i) bad |= ((bits[i] & 0x7f800000u) == 0x7f800000u);
  return bad == 0;
}

}  // namespace pipetrain::exec
