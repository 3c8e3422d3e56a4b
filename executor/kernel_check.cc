#include "executor/kernel_check.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>

#include "executor/backend.h"
#include "executor/cpu/kernels/blas_core.h"
#include "executor/cpu/kernels/blocked_layout.h"
#include "executor/cpu/kernels/kernel_paths.h"
#include "executor/cpu/kernels/sgemm.h"
#include "executor/kernel_check_cache.h"
#include "ir/graph.h"

namespace pipetrain::exec {

namespace {

using cpu::KernelPath;
using Clock = std::chrono::steady_clock;

// Set while the check runs on this thread: the backends it makes must not
// start it again.
thread_local bool t_checking = false;

// float32 sums of these sizes (k <= 300, windows of <= 144 taps, BatchNorm
// over <= 400 elements) stay within ~1e-6 of the reference; a wrong kernel is
// off by far more. GEMM errors are relative to sum |a b| per element, op
// errors to the output's largest magnitude.
constexpr double kGemmTolerance = 2e-5;
constexpr double kOpTolerance = 1e-4;

ir::Tensor random_tensor(const ir::Shape& shape, std::mt19937& rng, float lo = -1, float hi = 1) {
  ir::Tensor t(ir::DType::kF32, shape);
  std::uniform_real_distribution<float> u(lo, hi);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = u(rng);
  return t;
}

// One outcome: the worst error over tolerance seen, and where.
struct Worst {
  double ratio = 0;
  std::string where;
  int cases = 0;
  void see(double r, const std::string& label) {
    ++cases;
    if (!(r <= ratio)) ratio = r, where = label;  // NaN counts as the worst
  }
};

// --- GEMMs: against reference_sgemm -------------------------------------------------------

struct GemmShape {
  int64_t m, n, k;
};
// Edges of every register block the libraries use (odd sizes), and one
// product wide enough for oneDNN's swapped weight product (n, k >= 256).
const std::vector<GemmShape> kGemmShapes = {{7, 5, 3}, {17, 33, 65}, {64, 48, 96}, {130, 20, 70}};
const std::vector<GemmShape> kMatmulShapes = {{7, 5, 3}, {17, 33, 65}, {64, 48, 96}, {9, 300, 260}};

using Product = std::function<void(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t,
                                   const float*, int64_t, float, float*)>;

// Y = alpha op(A) op(B) + beta C in double, and the same over |A|, |B|, |C|:
// the scale float32 rounding is relative to.
void reference_and_scale(bool ta, bool tb, const GemmShape& s, float alpha, const float* a,
                         int64_t lda, const float* b, int64_t ldb, float beta, const float* c,
                         std::vector<double>* ref, std::vector<double>* scale) {
  ref->assign(static_cast<size_t>(s.m * s.n), 0.0);
  scale->assign(ref->size(), 0.0);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double sum = 0, abs_sum = 0;
      for (int64_t p = 0; p < s.k; ++p) {
        const double x =
            double(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
        sum += x;
        abs_sum += std::fabs(x);
      }
      const double cv = beta == 0.0f ? 0.0 : double(beta) * c[i * s.n + j];
      (*ref)[static_cast<size_t>(i * s.n + j)] = alpha * sum + cv;
      (*scale)[static_cast<size_t>(i * s.n + j)] = std::fabs(alpha) * abs_sum + std::fabs(cv);
    }
}

// Every transpose combination, beta 0 and 1; rows padded past their length
// where `pad` (the weight products take dense rows, as the kernels call them).
void check_gemm(const Product& product, Worst& w, std::mt19937& rng,
                const std::vector<GemmShape>& shapes = kGemmShapes, bool pad = true) {
  std::vector<double> ref, scale;
  for (const GemmShape& s : shapes)
    for (int t = 0; t < 8; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const float beta = (t & 4) ? 1.0f : 0.0f;
      const int64_t lda = (ta ? s.m : s.k) + (pad ? 3 : 0), ldb = (tb ? s.k : s.n) + (pad ? 1 : 0);
      ir::Tensor a = random_tensor({(ta ? s.k : s.m), lda}, rng);
      ir::Tensor b = random_tensor({(tb ? s.n : s.k), ldb}, rng);
      ir::Tensor c = random_tensor({s.m, s.n}, rng);
      reference_and_scale(ta, tb, s, 0.5f, a.data<float>(), lda, b.data<float>(), ldb, beta,
                          c.data<float>(), &ref, &scale);
      ir::Tensor got = c.clone();
      product(ta, tb, s.m, s.n, s.k, a.data<float>(), lda, b.data<float>(), ldb, beta,
              got.data<float>());
      double r = 0;
      for (int64_t i = 0; i < got.numel(); ++i) {
        const float g = got.data<float>()[i];
        const double err = std::fabs(double(g) - ref[static_cast<size_t>(i)]);
        r = std::max(r, std::isnan(g)
                            ? INFINITY
                            : err / (kGemmTolerance * scale[static_cast<size_t>(i)] + 1e-30));
      }
      w.see(r, fmt::format("{}x{}x{} {}{} beta {}", s.m, s.n, s.k, ta ? 'T' : 'N', tb ? 'T' : 'N',
                           beta));
    }
}

// --- Ops: the CPU backend against the portable backend ------------------------------------

struct OpCase {
  std::string op, label;
  std::map<std::string, ir::Attribute> attrs;
  std::vector<ir::Tensor> inputs;
  size_t outputs = 1;
  bool training = false;
};

struct OneNode {
  ir::Graph g;
  explicit OneNode(const OpCase& c) {
    ir::Node n;
    n.name = c.op + "_check";
    n.op_type = c.op;
    n.attrs = c.attrs;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      const std::string name = "in" + std::to_string(i);
      n.inputs.push_back(name);
      g.set_tensor({name, c.inputs[i].dtype(), c.inputs[i].shape(), ir::Role::kInput});
      g.inputs.push_back(name);
    }
    for (size_t k = 0; k < c.outputs; ++k) {
      n.outputs.push_back("out" + std::to_string(k));
      g.outputs.push_back(n.outputs.back());
    }
    g.nodes.push_back(std::move(n));
    g.infer_shapes();
    g.verify();
  }
  const ir::Node& node() const { return g.nodes[0]; }
};

// The ports of a node the CPU backend would keep blocked (all it may).
void blocked_ports(const Backend& cpu, const OneNode& one, uint32_t* in, uint32_t* out) {
  *in = *out = 0;
  const LayoutAccess acc = cpu.layout_access(one.g, one.node());
  const ir::Node& n = one.node();
  auto ok = [&](const std::string& t) { return cpu.blockable(one.g.tensor(t)); };
  for (size_t i = 0; i < n.inputs.size() && i < 32; ++i) {
    const bool allowed = acc.role == LayoutRole::kSameLayout ||
                         (acc.role == LayoutRole::kConvLike && ((acc.inputs >> i) & 1u));
    if (allowed && ok(n.inputs[i])) *in |= 1u << i;
  }
  for (size_t k = 0; k < n.outputs.size() && k < 32; ++k) {
    const bool allowed = (acc.role == LayoutRole::kSameLayout && k == 0) ||
                         (acc.role == LayoutRole::kConvLike && ((acc.outputs >> k) & 1u));
    if (allowed && ok(n.outputs[k])) *out |= 1u << k;
  }
}

// Runs the case on `b` with the given ports blocked; returns row-major outputs.
std::vector<ir::Tensor> run_case(Backend& b, const OpCase& c, const OneNode& one, uint32_t in_mask,
                                 uint32_t out_mask) {
  std::vector<ir::Tensor> ins, outs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!((in_mask >> i) & 1u)) {
      ins.push_back(c.inputs[i].clone());
      continue;
    }
    ir::Tensor t(ir::DType::kF32, c.inputs[i].shape());
    cpu::to_blocked(c.inputs[i].data<float>(), t.data<float>(), t.shape());
    ins.push_back(t);
  }
  for (size_t k = 0; k < c.outputs; ++k) {
    const ir::TensorDesc& d = one.g.tensor(one.node().outputs[k]);
    outs.emplace_back(d.dtype, d.shape);
  }
  KernelContext ctx;
  ctx.node = &one.node();
  for (auto& t : ins) ctx.inputs.push_back(&t);
  for (auto& t : outs) ctx.outputs.push_back(&t);
  ctx.training = c.training;
  ctx.input_is_value.assign(ins.size(), false);
  ctx.blocked_inputs = in_mask;
  ctx.blocked_outputs = out_mask;
  b.run(ctx);
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!((out_mask >> k) & 1u)) continue;
    ir::Tensor plain(ir::DType::kF32, outs[k].shape());
    cpu::from_blocked(outs[k].data<float>(), plain.data<float>(), plain.shape());
    outs[k] = plain;
  }
  return outs;
}

double op_error(const std::vector<ir::Tensor>& got, const std::vector<ir::Tensor>& want) {
  double r = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    const float* g = got[k].data<float>();
    const float* w = want[k].data<float>();
    double scale = 0, err = 0;
    for (int64_t i = 0; i < want[k].numel(); ++i) {
      scale = std::max(scale, std::fabs(double(w[i])));
      err = std::max(err, std::isnan(g[i]) ? INFINITY : std::fabs(double(g[i]) - w[i]));
    }
    r = std::max(r, err / (kOpTolerance * scale + 1e-30));
  }
  return r;
}

std::vector<OpCase> conv_cases(std::mt19937& rng, bool grad) {
  struct Geo {
    ir::Shape x, w;
    int64_t stride, pad, group;
    const char* label;
  };
  const Geo geos[] = {{{2, 16, 12, 12}, {16, 16, 3, 3}, 1, 1, 1, "3x3"},
                      {{2, 16, 12, 12}, {32, 16, 3, 3}, 2, 1, 1, "3x3 stride 2"},
                      {{2, 16, 10, 10}, {16, 4, 3, 3}, 1, 1, 4, "3x3 4 groups"},
                      {{2, 32, 10, 10}, {16, 32, 1, 1}, 1, 0, 1, "1x1"},
                      {{2, 16, 4, 4}, {16, 16, 3, 3}, 2, 1, 1, "2x2 output"}};
  std::vector<OpCase> cases;
  for (const Geo& g : geos) {
    OpCase c;
    c.op = grad ? "ConvGrad" : "Conv";
    c.label = g.label;
    c.attrs = {{"strides", std::vector<int64_t>{g.stride, g.stride}},
               {"pads", std::vector<int64_t>{g.pad, g.pad, g.pad, g.pad}},
               {"group", g.group}};
    const int64_t out = (g.x[2] + 2 * g.pad - g.w[2]) / g.stride + 1;
    ir::Tensor x = random_tensor(g.x, rng), w = random_tensor(g.w, rng);
    if (grad) {
      c.inputs = {random_tensor({g.x[0], g.w[0], out, out}, rng), x, w};
      c.outputs = 3;
    } else {
      c.inputs = {x, w, random_tensor({g.w[0]}, rng)};
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<OpCase> pool_grad_cases(std::mt19937& rng) {
  std::vector<OpCase> cases;
  struct Geo {
    int64_t size, kernel, stride, pad;
    const char* label;
  };
  const Geo geos[] = {{8, 2, 2, 0, "2x2 stride 2"}, {9, 3, 2, 1, "3x3 stride 2 pad 1"}};
  for (const Geo& g : geos) {
    const int64_t out = (g.size + 2 * g.pad - g.kernel) / g.stride + 1;
    const std::map<std::string, ir::Attribute> window = {
        {"kernel_shape", std::vector<int64_t>{g.kernel, g.kernel}},
        {"strides", std::vector<int64_t>{g.stride, g.stride}},
        {"pads", std::vector<int64_t>{g.pad, g.pad, g.pad, g.pad}}};
    const ir::Shape x = {2, 16, g.size, g.size}, y = {2, 16, out, out};
    OpCase max{"MaxPoolGrad", g.label, window, {random_tensor(y, rng), random_tensor(x, rng)}};
    cases.push_back(max);
    OpCase avg{"AveragePoolGrad", g.label, window, {random_tensor(y, rng)}};
    avg.attrs["input_shape"] = std::vector<int64_t>(x.begin(), x.end());
    cases.push_back(avg);
  }
  return cases;
}

std::vector<OpCase> batch_norm_cases(std::mt19937& rng) {
  std::vector<OpCase> cases;
  for (const ir::Shape& x : {ir::Shape{2, 16, 5, 5}, ir::Shape{4, 32, 3, 3}}) {
    const std::string label = ir::shape_str(x);
    const ir::Shape c = {x[1]};
    OpCase fwd{"BatchNormalization",
               label,
               {{"epsilon", 1e-5f}, {"momentum", 0.9f}, {"training_mode", int64_t{1}}},
               {random_tensor(x, rng, -2, 3), random_tensor(c, rng, 0.5, 1.5),
                random_tensor(c, rng), random_tensor(c, rng), random_tensor(c, rng, 0.5, 1.5)},
               3,
               true};
    cases.push_back(fwd);
    OpCase grad{
        "BatchNormalizationGrad",
        label,
        {{"epsilon", 1e-5f}},
        {random_tensor(x, rng), random_tensor(x, rng, -2, 3), random_tensor(c, rng, 0.5, 1.5)},
        3};
    cases.push_back(grad);
  }
  return cases;
}

// The cases of one op family in one layout against the portable backend;
// skipped (false) when the op cannot take that layout here.
bool check_ops(const std::vector<OpCase>& cases, const std::string& op, bool blocked, Worst& w) {
  CpuBackendOptions options;
  auto cpu = make_cpu_backend(options);
  auto portable = make_portable_backend();
  bool any = false;
  for (const OpCase& c : cases) {
    if (c.op != op) continue;
    OneNode one(c);
    uint32_t in = 0, out = 0;
    if (blocked) {
      blocked_ports(*cpu, one, &in, &out);
      if (in == 0 && out == 0) continue;
    }
    any = true;
    const auto want = run_case(*portable, c, one, 0, 0);
    const auto got = run_case(*cpu, c, one, in, out);
    w.see(op_error(got, want), c.label);
  }
  return any;
}

KernelFamilyCheck finish(const std::string& family, const std::string& path, const Worst& w,
                         Clock::time_point start) {
  KernelFamilyCheck f;
  f.family = family;
  f.path = path;
  f.cases = w.cases;
  f.worst = w.ratio;
  f.worst_case = w.where;
  f.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return f;
}

void check_gemm_library(KernelPath lib, const std::string& family, KernelCheckReport& report,
                        std::mt19937& rng) {
  const auto start = Clock::now();
  auto on = [lib](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c) {
    cpu::sgemm_on(lib, ta, tb, m, n, k, 0.5f, a, lda, b, ldb, beta, c, n);
  };
  Worst w;
  check_gemm(on, w, rng);
  report.families.push_back(finish(family, cpu::kernel_path_name(lib), w, start));
}

// oneDNN's matmul primitive: weight products (where it runs them on brgemm)
// and batches of products.
void check_matmul(KernelCheckReport& report, std::mt19937& rng) {
  const auto start = Clock::now();
  Worst w;
  int on_brgemm = 0;
  auto weight = [&](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                    const float* b, int64_t ldb, float beta, float* c) {
    cpu::WeightGemm g;
    g.m = m, g.n = n, g.k = k, g.lda = lda, g.ldw = ldb, g.ta = ta, g.tw = tb, g.alpha = 0.5f;
    g.accumulate = beta != 0.0f;
    if (cpu::sgemm_weight(g, a, b, nullptr, c))
      ++on_brgemm;
    else  // a product brgemm does not take: the reference stands in
      cpu::reference_sgemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, beta, c, n);
  };
  check_gemm(weight, w, rng, kMatmulShapes, false);
  auto batched = [](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                    const float* b, int64_t ldb, float beta, float* c) {
    // Two products of the same matrices, laid one after the other; the
    // second one's result is checked.
    const int64_t sa = (ta ? k : m) * lda, sb = (tb ? n : k) * ldb, sc = m * n;
    std::vector<float> a2(a, a + sa), b2(b, b + sb), c2(c, c + sc);
    a2.insert(a2.end(), a, a + sa);
    b2.insert(b2.end(), b, b + sb);
    c2.insert(c2.end(), c, c + sc);
    cpu::sgemm_batched(ta, tb, m, n, k, 0.5f, a2.data(), lda, sa, b2.data(), ldb, sb, beta,
                       c2.data(), n, sc, 2);
    std::copy(c2.begin() + sc, c2.end(), c);
  };
  check_gemm(batched, w, rng);
  KernelFamilyCheck f = finish(
      on_brgemm ? "matmul on oneDNN (weight products, batches)" : "matmul on oneDNN (batches)",
      cpu::kernel_path_name(KernelPath::kDnnlMatmul), w, start);
  report.families.push_back(f);
}

struct OpFamily {
  std::string op, family;
  std::function<std::vector<OpCase>(std::mt19937&)> cases;
  std::optional<KernelPath> library;  // a oneDNN path to avoid before the op itself
};

std::vector<OpFamily> op_families() {
  return {{"Conv", "convolution", [](std::mt19937& r) { return conv_cases(r, false); },
           KernelPath::kDnnlConv},
          {"ConvGrad", "convolution gradient", [](std::mt19937& r) { return conv_cases(r, true); },
           KernelPath::kDnnlConvGrad},
          {"MaxPoolGrad", "max-pool gradient", pool_grad_cases, std::nullopt},
          {"AveragePoolGrad", "average-pool gradient", pool_grad_cases, std::nullopt},
          {"BatchNormalization", "BatchNorm (batch statistics)", batch_norm_cases, std::nullopt},
          {"BatchNormalizationGrad", "BatchNorm gradient", batch_norm_cases, std::nullopt}};
}

void check_op_family(const OpFamily& fam, bool blocked, KernelCheckReport& report,
                     std::mt19937& rng) {
  const auto start = Clock::now();
  const std::vector<OpCase> cases = fam.cases(rng);
  const std::string path = fam.op + (blocked ? ":blocked" : "");
  const std::string layout =
      blocked ? fmt::format(", {}", cpu::channel_block(16) == 16
                                        ? std::string("nhwc")
                                        : fmt::format("nChw{}c", cpu::channel_block(16)))
              : ", row-major";
  Worst w;
  const bool ran = check_ops(cases, fam.op, blocked, w);
  KernelFamilyCheck f = finish(fam.family + layout, path, w, start);
  if (!ran) {
    f.skipped = true;
    f.skip_reason = "never blocked on this CPU";
    report.families.push_back(f);
    return;
  }
  if (f.ok()) {
    report.families.push_back(f);
    return;
  }
  f.avoided = true;
  Worst again;
  if (fam.library && !cpu::path_avoided(*fam.library)) {
    cpu::set_path_avoided(*fam.library, true);
    f.fallback = "im2col + GEMM (not oneDNN)";
    check_ops(cases, fam.op, blocked, again);
  }
  if (again.cases == 0 || again.ratio > 1.0) {
    // Still wrong (or no library path): the op's own kernel goes.
    cpu::avoid_op(fam.op, blocked);
    f.fallback = blocked ? "row-major" : "the portable backend's kernel";
    again = Worst{};
    check_ops(cases, fam.op, false, again);  // a new CPU backend: it runs the fallback
  }
  f.fallback_worst = again.ratio;
  f.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  report.families.push_back(f);
}

void decide_gemm(KernelCheckReport& report, std::mt19937& rng) {
  KernelFamilyCheck& blas = report.families[report.families.size() - 2];
  KernelFamilyCheck& dnnl = report.families.back();
  const bool blas_bad = !blas.ok();
  const bool dnnl_bad = !dnnl.ok();
  if (blas_bad) cpu::set_path_avoided(KernelPath::kOpenBlasGemm, true);
  if (dnnl_bad) cpu::set_path_avoided(KernelPath::kDnnlGemm, true);
  for (KernelFamilyCheck* f : {&blas, &dnnl}) {
    if (!(f == &blas ? blas_bad : dnnl_bad)) continue;
    f->avoided = true;
    f->fallback = blas_bad && dnnl_bad ? "plain loops (slow)"
                  : f == &blas         ? "oneDNN's sgemm"
                                       : "OpenBLAS";
    Worst w;  // the public entry now takes the fallback
    check_gemm([](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta,
                  float* c) { cpu::blas_sgemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, beta, c, n); },
               w, rng);
    f->fallback_worst = w.ratio;
  }
}

}  // namespace

bool KernelCheckReport::trustworthy() const {
  for (const auto& f : families)
    if (!(f.ok() || (f.avoided && f.fallback_ok()))) return false;
  return true;
}

KernelCheckReport run_kernel_check() {
  const bool was_checking = t_checking;
  t_checking = true;
  struct Restore {
    bool v;
    ~Restore() { t_checking = v; }
  } restore{was_checking};
  cpu::clear_avoided();
  KernelCheckReport report;
  const auto start = Clock::now();
  std::mt19937 rng(20261206);
  // GEMMs first: the portable backend, the ops' reference, multiplies on blas_sgemm.
  check_gemm_library(KernelPath::kOpenBlasGemm,
                     fmt::format("GEMM on OpenBLAS ({} kernels{})", cpu::blas_core(),
                                 cpu::openblas_fell_back() ? ", unused here" : ""),
                     report, rng);
  check_gemm_library(KernelPath::kDnnlGemm, "GEMM on oneDNN's sgemm", report, rng);
  decide_gemm(report, rng);
  check_matmul(report, rng);
  if (!report.families.back().ok()) {
    KernelFamilyCheck& f = report.families.back();
    cpu::set_path_avoided(KernelPath::kDnnlMatmul, true);
    f.avoided = true;
    f.fallback = "blas_sgemm per matrix";
    Worst w;
    check_gemm(
        [](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c) {
          cpu::sgemm_batched(ta, tb, m, n, k, 0.5f, a, lda, 0, b, ldb, 0, beta, c, n, m * n, 1);
        },
        w, rng);
    f.fallback_worst = w.ratio;
  }
  for (const OpFamily& fam : op_families()) {
    check_op_family(fam, false, report, rng);
    check_op_family(fam, true, report, rng);
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

const KernelCheckReport& ensure_kernel_check() {
  static KernelCheckReport report;
  if (t_checking) return report;  // a backend the check itself makes
  static std::once_flag once;
  std::call_once(once, [] {
    // The verdict an earlier process reached with the same CPU, binaries and variables
    // (kernel_check_cache.h), else the check itself, kept for the processes after this one.
    const std::string key = kernel_check_key();
    const std::string file = kernel_check_cache_file(key);
    if (auto cached = restore_kernel_check(file, key)) {
      report = std::move(*cached);
    } else {
      report = run_kernel_check();
      store_kernel_check(file, key, report);
    }
    for (const auto& f : report.families)
      if (f.avoided) std::fputs((avoided_notice(f) + "\n").c_str(), stderr);
  });
  return report;
}

std::string avoided_notice(const KernelFamilyCheck& f) {
  return fmt::format(
      "pipetrain: kernel check: {} disagrees with the reference on this CPU ({}: {:.3g}x its "
      "tolerance); using {} instead{}",
      f.family, f.worst_case, f.worst, f.fallback,
      f.fallback_ok() ? "" : fmt::format(", which disagrees too ({:.3g}x)", f.fallback_worst));
}

}  // namespace pipetrain::exec
