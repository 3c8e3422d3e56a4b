// Finite-difference gradient checks of one op: the op's trainable inputs are
// graph params, the loss is sum(Y * R) for fixed random R per output, and
// each analytic gradient from build_backward is compared with central
// differences of the forward graph (loss summed on the host in double).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "autodiff/autodiff.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "ir/graph.h"
#include "ir/op_registry.h"

namespace pipetrain::test {

// kHalf: (-0.5, 0.5) (asin, atanh away from their poles); kAboveOne: (1.2, 2.2) (acosh).
// kGrid: GridSample coordinates, reaching past [-1, 1] into the padding.
enum class Gen { kUniform, kAwayFromZero, kPositive, kDistinct, kHalf, kAboveOne, kGrid };

struct Arg {
  ir::Tensor value;         // constant value, or the initial value of a param
  bool trainable = false;   // a param: its gradient is checked
  bool absent = false;      // an absent optional input ("")
  Gen gen = Gen::kUniform;  // how a param's values are drawn
};

inline ir::Tensor random_tensor(ir::Shape s, Gen gen, std::mt19937_64& rng) {
  ir::Tensor t(ir::DType::kF32, std::move(s));
  float* p = t.data<float>();
  const int64_t n = t.numel();
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    float v = u(rng);
    switch (gen) {
      case Gen::kUniform: break;
      case Gen::kAwayFromZero: v = (v < 0 ? -1.0f : 1.0f) * (0.2f + 0.8f * std::abs(v)); break;
      case Gen::kPositive: v = 0.5f + 0.75f * (v + 1.0f); break;
      case Gen::kDistinct: v = -1.0f + 2.0f * static_cast<float>(i) / static_cast<float>(n); break;
      case Gen::kHalf: v *= 0.5f; break;
      case Gen::kAboveOne: v = 1.7f + 0.5f * v; break;
      case Gen::kGrid: v *= 1.3f; break;
    }
    p[i] = v;
  }
  if (gen == Gen::kDistinct) std::shuffle(p, p + n, rng);
  return t;
}

struct GradCase {
  std::string name;
  std::string op;
  std::vector<Arg> args;  // every input in order
  std::map<std::string, ir::Attribute> attrs;
  size_t outputs = 1;
  std::vector<size_t> loss_outputs = {0};
  bool training = false;
  double step = 1e-3;
  double rtol = 1e-2, atol = 1e-3;
};

/// A param placeholder at this input position (shape and generator).
inline Arg P(ir::Shape s, Gen g = Gen::kUniform) {
  return {ir::Tensor(ir::DType::kF32, std::move(s)), true, false, g};
}
inline Arg C(ir::Tensor t) {
  return {std::move(t), false, false};
}
inline Arg None() {
  return {ir::Tensor(), false, true};
}

struct GradCheckResult {
  double worst = 0;  // max |analytic - numeric| / (atol + rtol |numeric|)
  std::string where;
};

/// One case as graphs: `training` has the op, the loss sum_k sum(y_k * r_k)
/// and the backward pass; `forward` outputs the y_k the loss reads.
struct CaseGraphs {
  ir::Graph training, forward;
  std::vector<ir::Tensor> r;        // per loss output
  std::vector<std::string> params;  // the op's trainable inputs
  autodiff::BackwardResult bw;
};

inline CaseGraphs build_case(const GradCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  CaseGraphs cg;
  ir::Graph& g = cg.training;
  std::vector<std::string>& params = cg.params;
  std::vector<ir::Tensor>& r = cg.r;
  g.name = c.name;
  ir::Node n;
  n.name = c.op + "_0";
  n.op_type = c.op;
  n.attrs = c.attrs;
  for (size_t i = 0; i < c.args.size(); ++i) {
    if (c.args[i].absent) {
      n.inputs.push_back("");
      continue;
    }
    std::string name = "in" + std::to_string(i);
    n.inputs.push_back(name);
    if (c.args[i].trainable) {
      g.set_value(name, random_tensor(c.args[i].value.shape(), c.args[i].gen, rng),
                  ir::Role::kParam);
      params.push_back(name);
    } else {
      g.set_value(name, c.args[i].value, ir::Role::kConstant);
    }
  }
  for (size_t k = 0; k < c.outputs; ++k) n.outputs.push_back("y" + std::to_string(k));
  g.nodes.push_back(n);
  g.infer_shapes();
  // loss = sum_k ReduceSum(y_k * r_k)
  std::string acc;
  for (size_t k : c.loss_outputs) {
    const ir::TensorDesc& d = g.tensor(n.outputs[k]);
    r.push_back(random_tensor(d.shape, Gen::kUniform, rng));
    std::string rn = "r" + std::to_string(k);
    g.set_value(rn, r.back(), ir::Role::kConstant);
    std::string m = "m" + std::to_string(k), s = "s" + std::to_string(k);
    g.nodes.push_back({"mul" + std::to_string(k), "Mul", {n.outputs[k], rn}, {m}, {}});
    g.nodes.push_back({"sum" + std::to_string(k),
                       "ReduceSum",
                       {m},
                       {s},
                       {{"keepdims", ir::Attribute(int64_t{0})}}});
    if (acc.empty()) {
      acc = s;
    } else {
      std::string t = "acc" + std::to_string(k);
      g.nodes.push_back({"add" + std::to_string(k), "Add", {acc, s}, {t}, {}});
      acc = t;
    }
  }
  g.outputs = {acc};
  g.infer_shapes();
  cg.forward = g;  // for the finite differences: outputs y_k
  cg.forward.outputs.clear();
  for (size_t k : c.loss_outputs) cg.forward.outputs.push_back(n.outputs[k]);
  cg.bw = autodiff::build_backward(g, acc);
  g.verify();
  return cg;
}

/// Builds the graph, differentiates, checks every param element (sampled when large).
inline GradCheckResult check_gradients(const GradCase& c, uint64_t seed) {
  CaseGraphs cg = build_case(c, seed);
  const ir::Graph& g = cg.training;
  ir::Graph& fwd = cg.forward;
  const std::vector<ir::Tensor>& r = cg.r;
  const autodiff::BackwardResult& bw = cg.bw;
  auto backend = exec::make_cpu_backend();
  exec::RunOptions opts;
  opts.training = c.training;
  opts.seed = seed;
  auto grads = exec::ForwardRunner(g, *backend).run({}, opts);

  auto loss_of = [&](const ir::Graph& graph) {
    ++opts.values_version;  // the probe changed a param in place
    auto ys = exec::ForwardRunner(graph, *backend).run({}, opts);
    double l = 0;
    for (size_t j = 0; j < c.loss_outputs.size(); ++j) {
      const ir::Tensor& y = ys.at(graph.outputs[j]);
      for (int64_t i = 0; i < y.numel(); ++i)
        l += static_cast<double>(y.data<float>()[i]) * r[j].data<float>()[i];
    }
    return l;
  };
  GradCheckResult res;
  for (const auto& p : cg.params) {
    if (!bw.grads.count(p)) {
      res.worst = 1e30;
      res.where = "no gradient for " + p;
      return res;
    }
    const ir::Tensor analytic = grads.at(bw.grads.at(p));
    ir::Tensor x = fwd.value(p)->clone();
    fwd.set_value(p, x, ir::Role::kParam);  // the graph now shares x's buffer
    const int64_t total = x.numel(), stride = total > 64 ? total / 64 + 1 : 1;
    for (int64_t i = 0; i < total; i += stride) {
      float* xi = x.data<float>() + i;
      const float orig = *xi;
      const float h = static_cast<float>(c.step * std::max(1.0, std::abs(double(orig))));
      *xi = orig + h;
      const double lp = loss_of(fwd);
      *xi = orig - h;
      const double lm = loss_of(fwd);
      *xi = orig;
      const double numeric = (lp - lm) / (2.0 * static_cast<double>(h));
      const double a = analytic.data<float>()[i];
      const double err = std::abs(a - numeric) / (c.atol + c.rtol * std::abs(numeric));
      if (!(err <= res.worst)) {
        res.worst = std::isnan(err) ? 1e30 : err;
        res.where = p + "[" + std::to_string(i) + "]: analytic " + std::to_string(a) +
                    ", numeric " + std::to_string(numeric);
      }
    }
  }
  return res;
}

}  // namespace pipetrain::test
