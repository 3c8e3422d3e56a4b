// Products with a weight (a graph value) on oneDNN's brgemm matmul, which
// beat OpenBLAS (Debian 0.3.21, SkylakeX kernels) on one AVX-512 core at
// the shapes training runs: 32 x 1024 x 1024 (a microbatch through a wide
// layer, W transposed) 0.68 ms against 0.91; 128 x 1024 x 1024 1.85 against
// 2.18; 1024 x 256 x 1024 (the transformer's MLP) 3.52 against 3.90; only
// 1024 x 768 x 256 untransposed was 4% slower. The weight is read as stored:
// reordering it once per update into oneDNN's blocks measured faster alone
// (0.50 ms for the first product) but slower in a pipeline, where the 4 MiB
// copy came from memory (1 ms a weight) and flush schedules' forwards went
// from 11 to 16 ms per minibatch.
#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "executor/cpu/kernels/cpu_threads.h"
#include "executor/cpu/kernels/dnnl_util.h"
#include "executor/cpu/kernels/kernel_paths.h"
#include "executor/cpu/kernels/sgemm.h"

namespace pipetrain::exec::cpu {

namespace {

using dnnl::memory;
namespace du = dnnl_util;

struct WeightProduct {
  dnnl::matmul prim;
  memory::desc a, w, bias, y, scratch;
};

// The primitive of `d` into r, when oneDNN runs it on brgemm (false otherwise).
bool make_brgemm(const dnnl::matmul::desc& d, const dnnl::primitive_attr& attr, WeightProduct* r) {
  // One creation at a time: two workers building the same product at once
  // shared oneDNN's primitive-descriptor cache unsynchronised as far as
  // ThreadSanitizer could see (a data race on the descriptor's scratchpad
  // query in the profile's neighbour threads). Creation is rare: the result is cached.
  static std::mutex creating;
  std::lock_guard<std::mutex> lock(creating);
  try {
    dnnl::matmul::primitive_desc pd(d, attr, du::engine());
    // Elsewhere (AVX2: oneDNN's gemm-based matmul) OpenBLAS is as fast.
    if (std::string(pd.impl_info_str()).rfind("brg", 0) != 0) return false;
    r->scratch = pd.scratchpad_desc();
    r->prim = dnnl::matmul(pd);
  } catch (const dnnl::error&) {
    return false;
  }
  return true;
}

std::shared_ptr<WeightProduct> make_product(const WeightGemm& g) {
  auto r = std::make_shared<WeightProduct>();
  r->a = du::plain_desc({g.m, g.k}, g.ta ? ir::Shape{1, g.lda} : ir::Shape{g.lda, 1});
  r->w = du::plain_desc({g.k, g.n}, g.tw ? ir::Shape{1, g.ldw} : ir::Shape{g.ldw, 1});
  r->y = du::plain_desc({g.m, g.n});
  if (g.bias) r->bias = du::plain_desc({1, g.n});
  const auto d =
      g.bias ? dnnl::matmul::desc(r->a, r->w, r->bias, r->y) : dnnl::matmul::desc(r->a, r->w, r->y);
  if (!make_brgemm(d, du::matmul_attr(g.alpha, g.accumulate ? 1.0f : 0.0f), r.get()))
    return nullptr;
  return r;
}

// A microbatch's few rows against a wide weight, swapped: T = op(W)^T op(A)^T
// (n, m) with W as the matmul's source, which brgemm reads in place, and
// A^T as its B, which it repacks per call (cheap at m rows; repacking a
// 1024 x 1024 W per call is what slows the direct product at few rows).
// Then Y = T^T (+ bias) (+ Y). One AVX-512 core, W 1024 x 1024, best of 5,
// direct against swapped (transposing back not included, ~2% of these):
// Y = A W^T 0.35 / 0.25 ms at 16 rows, 0.49 / 0.35 at 32, 0.77 / 0.67 at 64,
// 1.40 / 1.32 at 128, level at 256; Y = A W 0.48 / 0.44 at 16, 0.66 / 0.59 at
// 32, 0.96 / 0.93 at 64, slower from 128.
bool swapped_case(const WeightGemm& g) {
  if (g.ta || g.n < 256 || g.k < 256 || g.n < 4 * g.m) return false;
  return g.m <= (g.tw ? 128 : 32);
}

std::shared_ptr<WeightProduct> make_swapped_product(const WeightGemm& g) {
  auto r = std::make_shared<WeightProduct>();
  // Source op(W)^T (n, k): W stored (n, k) when tw, else (k, n) read transposed.
  r->w = du::plain_desc({g.n, g.k}, g.tw ? ir::Shape{g.ldw, 1} : ir::Shape{1, g.ldw});
  r->a = du::plain_desc({g.k, g.m}, ir::Shape{1, g.lda});  // A (m, k) read transposed
  r->y = du::plain_desc({g.n, g.m});
  if (!make_brgemm(dnnl::matmul::desc(r->w, r->a, r->y), du::matmul_attr(g.alpha, 0.0f), r.get()))
    return nullptr;
  return r;
}

// Y (m, n) = T^T (+ bias) (+ Y), T (n, m): eight rows of Y at a time, so each
// of T's rows is read in runs of eight.
void transpose_back(const WeightGemm& g, const float* t, const float* bias, float* y) {
  constexpr int64_t kRows = 8;
  const int64_t m = g.m, n = g.n;
  parallel_for(
      m, m * n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i0 = begin; i0 < end; i0 += kRows) {
          const int64_t rows = std::min(kRows, end - i0);
          for (int64_t j = 0; j < n; ++j) {
            const float b = bias ? bias[j] : 0.0f;
            const float* tj = t + j * m + i0;
            for (int64_t r = 0; r < rows; ++r) {
              float& out = y[(i0 + r) * n + j];
              const float v = bias ? tj[r] + b : tj[r];
              out = g.accumulate ? out + v : v;
            }
          }
        }
      },
      kRows);
}

bool swapped_product(const WeightGemm& g, const float* a, const float* w, const float* bias,
                     float* y) {
  const std::string key = "swapped weight matmul m" + std::to_string(g.m) + " n" +
                          std::to_string(g.n) + " k" + std::to_string(g.k) + " lda" +
                          std::to_string(g.lda) + " ldw" + std::to_string(g.ldw) +
                          (g.tw ? " tw" : "") + " alpha " + std::to_string(g.alpha) + " threads " +
                          std::to_string(dnnl_threads());
  auto p = du::cached_as<WeightProduct>(key, [&] { return make_swapped_product(g); });
  if (!p) return false;
  thread_local std::vector<float> t;
  t.resize(static_cast<size_t>(g.n * g.m));
  auto& eng = du::engine();
  auto& s = du::stream();
  p->prim.execute(s, {{DNNL_ARG_SRC, memory(p->w, eng, const_cast<float*>(w))},
                      {DNNL_ARG_WEIGHTS, memory(p->a, eng, const_cast<float*>(a))},
                      {DNNL_ARG_DST, memory(p->y, eng, t.data())},
                      {DNNL_ARG_SCRATCHPAD, du::scratchpad(p->scratch)}});
  s.wait();
  transpose_back(g, t.data(), g.bias ? bias : nullptr, y);
  return true;
}

}  // namespace

bool sgemm_weight(const WeightGemm& g, const float* a, const float* w, const float* bias,
                  float* y) {
  if (g.m == 0 || g.n == 0 || g.k == 0 || path_avoided(KernelPath::kDnnlMatmul)) return false;
  if (swapped_case(g) && swapped_product(g, a, w, bias, y)) {
    if (fault_injected(KernelPath::kDnnlMatmul)) inject_error(y, 1);
    return true;
  }
  const std::string key = "weight matmul m" + std::to_string(g.m) + " n" + std::to_string(g.n) +
                          " k" + std::to_string(g.k) + " lda" + std::to_string(g.lda) + " ldw" +
                          std::to_string(g.ldw) + (g.ta ? " ta" : "") + (g.tw ? " tw" : "") +
                          " alpha " + std::to_string(g.alpha) + (g.bias ? " bias" : "") +
                          (g.accumulate ? " acc" : "") + " threads " +
                          std::to_string(dnnl_threads());
  auto p = du::cached_as<WeightProduct>(key, [&] { return make_product(g); });
  if (!p) return false;
  auto& eng = du::engine();
  auto& s = du::stream();
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, memory(p->a, eng, const_cast<float*>(a))},
      {DNNL_ARG_WEIGHTS, memory(p->w, eng, const_cast<float*>(w))},
      {DNNL_ARG_DST, memory(p->y, eng, y)},
      {DNNL_ARG_SCRATCHPAD, du::scratchpad(p->scratch)}};
  if (g.bias) args[DNNL_ARG_BIAS] = memory(p->bias, eng, const_cast<float*>(bias));
  p->prim.execute(s, args);
  s.wait();
  if (fault_injected(KernelPath::kDnnlMatmul)) inject_error(y, 1);
  return true;
}

}  // namespace pipetrain::exec::cpu
