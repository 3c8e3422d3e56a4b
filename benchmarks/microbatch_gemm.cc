// What a microbatch costs against its share of the whole minibatch, in the
// products that dominate a wide layer's training step: per layer of
// `width` x `width`, the forward Y = X W^T + b, the input gradient dX = dY W
// and the weight gradient dW += dY^T X, each through the kernels the Gemm op
// runs (oneDNN's brgemm where the CPU has it, else OpenBLAS), at the
// minibatch's rows and at a microbatch's, with the weight in the cache
// (one weight) and out of it (a rotation over more weights than the last
// level cache holds, as in a pipeline stage whose weights, gradients and
// optimizer state pass through the cache every step). From the cold figures
// it prints the ceiling of flush schedules on this CPU: the bubble bound
// m / (m + p - 1) x p, divided by how much slower m microbatches are than
// one minibatch.
//
//   build/benchmarks/microbatch_gemm --batch 128 --microbatches 4 --width 1024 --stages 2
#include <fmt/core.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <vector>

#include "executor/backend.h"
#include "executor/cpu/kernels/sgemm.h"

namespace pt = pipetrain;
namespace cpu = pt::exec::cpu;

namespace {

using Clock = std::chrono::steady_clock;

enum class Product { kForward, kInputGrad, kWeightGrad };
const char* name_of(Product p) {
  return p == Product::kForward     ? "Y = X W^T + b"
         : p == Product::kInputGrad ? "dX = dY W"
                                    : "dW += dY^T X";
}

// One product as the Gemm kernel runs it: brgemm with a weight operand where
// the CPU has it, else sgemm (executor/cpu/kernels/linalg.cc).
void run(Product p, int64_t rows, int64_t width, const float* act, const float* w,
         const float* bias, float* y) {
  cpu::WeightGemm g;
  g.n = g.k = width;
  g.lda = g.ldw = width;
  if (p == Product::kForward) {
    g.m = rows;
    g.tw = true;
    g.bias = true;
    if (cpu::sgemm_weight(g, act, w, bias, y)) return;
    for (int64_t i = 0; i < rows; ++i) std::copy(bias, bias + width, y + i * width);
    cpu::sgemm(false, true, rows, width, width, 1.0f, act, width, w, width, 1.0f, y);
  } else if (p == Product::kInputGrad) {
    g.m = rows;
    if (cpu::sgemm_weight(g, act, w, nullptr, y)) return;
    cpu::sgemm(false, false, rows, width, width, 1.0f, act, width, w, width, 0.0f, y);
  } else {  // y (width x width) accumulates dY^T X; act holds dY then X
    cpu::sgemm(true, false, width, width, rows, 1.0f, act, width, act + rows * width, width, 1.0f,
               y);
  }
}

struct Timing {
  double hot_ms = 0, cold_ms = 0;
};

// Best of `reps` passes over `count` weights (each pass: one call per weight).
Timing measure(Product p, int64_t rows, int64_t width, int count, int reps) {
  const size_t wn = static_cast<size_t>(width * width);
  std::vector<std::vector<float>> weights(static_cast<size_t>(count), std::vector<float>(wn));
  for (size_t c = 0; c < weights.size(); ++c)
    for (size_t i = 0; i < wn; ++i) weights[c][i] = static_cast<float>((i + c) % 7) * 0.01f;
  std::vector<float> act(static_cast<size_t>(2 * rows * width), 0.5f), bias(width, 0.1f),
      out(static_cast<size_t>(rows * width));
  // The weight gradient writes the weight-sized buffer: its accumulator is what goes cold.
  auto one = [&](size_t c) {
    float* y = p == Product::kWeightGrad ? weights[c].data() : out.data();
    const float* w = p == Product::kWeightGrad ? nullptr : weights[c].data();
    run(p, rows, width, act.data(), w, bias.data(), y);
  };
  Timing t;
  t.hot_ms = t.cold_ms = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto s = Clock::now();
    for (int i = 0; i < count; ++i) one(0);
    t.hot_ms = std::min(
        t.hot_ms, std::chrono::duration<double, std::milli>(Clock::now() - s).count() / count);
    s = Clock::now();
    for (size_t c = 0; c < weights.size(); ++c) one(c);
    t.cold_ms = std::min(
        t.cold_ms, std::chrono::duration<double, std::milli>(Clock::now() - s).count() / count);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A microbatch's products against its share of the minibatch's"};
  int64_t batch = 128, width = 1024;
  int microbatches = 4, stages = 2, reps = 5, threads = 1;
  app.add_option("--batch", batch, "Minibatch rows")->capture_default_str();
  app.add_option("--microbatches", microbatches, "Microbatches per minibatch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--width", width, "Layer width (the weight is width x width)")
      ->capture_default_str();
  app.add_option("--stages", stages, "Pipeline stages, for the bubble bound")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--reps", reps, "Passes per figure (the best is printed)")->capture_default_str();
  app.add_option("--threads", threads, "Threads of the kernels")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (batch % microbatches != 0) {
    fmt::print(stderr, "error: --batch {} is not a multiple of --microbatches {}\n", batch,
               microbatches);
    return 2;
  }
  pt::exec::set_cpu_threads(threads);
  const int64_t micro = batch / microbatches;
  // More weights than twice the last level cache holds (at least 4) for the cold figures.
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const double wbytes = 4.0 * static_cast<double>(width * width);
  // (Some VMs report an L3 far larger than the core's: at most 256 MiB of weights.)
  const double pool =
      std::min(2.0 * static_cast<double>(std::max(l3, 32L << 20)), 256.0 * (1 << 20));
  const int count = std::max(4, static_cast<int>(pool / wbytes) + 1);
  fmt::print(
      "products of a {} x {} layer, {} rows (minibatch) against {} x {} rows (microbatches), "
      "{} thread{}; cold: {} weights in rotation ({:.0f} MiB; the last level cache reported: "
      "{:.0f} MiB)\n",
      width, width, batch, microbatches, micro, threads, threads > 1 ? "s" : "", count,
      count * wbytes / 1048576.0, static_cast<double>(l3) / 1048576.0);
  fmt::print("{:<14} {:>5} {:>9} {:>9} {:>10} {:>14}\n", "product", "rows", "hot ms", "cold ms",
             "cold GF/s", "m x micro/mini");
  double mini_sum = 0, micro_sum = 0, weight_mini = 0, weight_micro = 0;
  for (Product p : {Product::kForward, Product::kInputGrad, Product::kWeightGrad}) {
    const Timing whole = measure(p, batch, width, count, reps);
    const Timing part = measure(p, micro, width, count, reps);
    const double flops = 2.0 * static_cast<double>(width * width);
    fmt::print("{:<14} {:>5} {:>9.3f} {:>9.3f} {:>10.1f}\n", name_of(p), batch, whole.hot_ms,
               whole.cold_ms, flops * batch / whole.cold_ms / 1e6);
    fmt::print("{:<14} {:>5} {:>9.3f} {:>9.3f} {:>10.1f} {:>14.2f}\n", "", micro, part.hot_ms,
               part.cold_ms, flops * micro / part.cold_ms / 1e6,
               microbatches * part.cold_ms / whole.cold_ms);
    mini_sum += whole.cold_ms;
    micro_sum += microbatches * part.cold_ms;
    if (p == Product::kWeightGrad) {
      weight_mini = whole.cold_ms;
      weight_micro = microbatches * part.cold_ms;
    }
  }
  const double slower = micro_sum / mini_sum;
  // Batched weight gradients (+bw): dW once per step at the minibatch's rows.
  const double slower_bw = (micro_sum - weight_micro + weight_mini) / mini_sum;
  const double bubble = static_cast<double>(microbatches * stages) / (microbatches + stages - 1);
  fmt::print(
      "a layer's forward and backward, cold: {} microbatches take {:.2f}x the minibatch's time "
      "({:.2f}x with the weight gradient batched)\n"
      "ceilings where these products are the step, x one worker on {} stages:\n"
      "  flush schedules, {} microbatches: bubble bound {:.2f}, with these products {:.2f} "
      "(+bw {:.2f})\n"
      "  2bw (no flush, microbatches): {:.2f}\n"
      "  asynchronous 1F1B (the minibatch whole): {:.2f}\n",
      microbatches, slower, slower_bw, stages, microbatches, bubble, bubble / slower,
      bubble / slower_bw, stages / slower, static_cast<double>(stages));
  return 0;
}
