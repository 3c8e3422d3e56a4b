// parallel_for, the CPU kernels' own thread split: its parts, when it forks,
// and that every kernel and the optimizer give one thread's bits at any
// thread count (rows stay whole, reductions keep their order).
#include "executor/cpu/kernels/cpu_threads.h"

#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "executor/optim/optimizer.h"
#include "tests/autodiff/grad_cases.h"

namespace pipetrain::test {
namespace {

using exec::cpu::parallel_for;

// Sets the kernels' thread count and parallel_for's least work per part for
// a test, and restores both after.
class ThreadSetting {
 public:
  ThreadSetting(int threads, int64_t min_work, int64_t max_align = INT64_MAX)
      : threads_(exec::cpu::dnnl_threads()),
        min_work_(exec::cpu::parallel_min_work()),
        max_align_(exec::cpu::parallel_max_align()) {
    exec::cpu::set_dnnl_threads(threads);
    exec::cpu::set_parallel_min_work(min_work, max_align);
  }
  ~ThreadSetting() {
    exec::cpu::set_dnnl_threads(threads_);
    exec::cpu::set_parallel_min_work(min_work_, max_align_);
  }

 private:
  int threads_;
  int64_t min_work_, max_align_;
};

struct Parts {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::set<std::thread::id> threads;
  void add(int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mu);
    ranges.emplace_back(b, e);
    threads.insert(std::this_thread::get_id());
  }
};

TEST(ParallelFor, PartsCoverTheRangeOnceOnAlignedBoundaries) {
  const ThreadSetting setting(3, 1);
  for (int64_t n : {1, 15, 16, 17, 31, 32, 33, 100, 1000, 4097})
    for (int64_t align : {1, 16}) {
      Parts parts;
      parallel_for(
          n, n, [&](int64_t b, int64_t e) { parts.add(b, e); }, align);
      std::vector<int> hits(static_cast<size_t>(n), 0);
      for (const auto& [b, e] : parts.ranges) {
        EXPECT_LT(b, e) << "n " << n << " align " << align;
        EXPECT_EQ(b % align, 0) << "n " << n << " align " << align << ": part at " << b;
        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
      }
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << "n " << n << " align " << align << " i " << i;
      // Forks whenever there are two aligned blocks to give out.
      if (n >= 2 * align) {
        EXPECT_GT(parts.ranges.size(), 1u) << "n " << n << " align " << align;
      } else {
        EXPECT_EQ(parts.ranges.size(), 1u) << "n " << n << " align " << align;
      }
    }
}

TEST(ParallelFor, SmallLoopsAndOneThreadScopesStayOnTheCallingThread) {
  const ThreadSetting setting(2, 32768);
  Parts small;
  parallel_for(1000, 1000 * 8, [&](int64_t b, int64_t e) { small.add(b, e); });
  ASSERT_EQ(small.ranges.size(), 1u);
  EXPECT_EQ(small.ranges[0], std::make_pair(int64_t{0}, int64_t{1000}));
  EXPECT_EQ(*small.threads.begin(), std::this_thread::get_id());
  Parts large;
  parallel_for(1 << 20, 1 << 20, [&](int64_t b, int64_t e) { large.add(b, e); });
  EXPECT_EQ(large.ranges.size(), 2u);
  EXPECT_EQ(large.threads.size(), 2u);
  const exec::cpu::OneThreadScope one;
  Parts scoped;
  parallel_for(1 << 20, 1 << 20, [&](int64_t b, int64_t e) { scoped.add(b, e); });
  EXPECT_EQ(scoped.ranges.size(), 1u);
}

bool same_bits(const ir::Tensor& a, const ir::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Ops whose CPU kernels are a library's (oneDNN, OpenBLAS), which may choose
// another algorithm or blocking at another thread count; every other kernel
// must not depend on it.
const std::set<std::string> kLibraryKernels = {
    "Conv",   "ConvTranspose", "ConvGrad", "ConvTransposeGrad", "Gemm",
    "MatMul", "LSTM",          "LSTMGrad", "Attention",         "AttentionGrad"};

// Runs each case's training graph (forward, loss, backward) on the CPU
// backend at 2 and 3 threads, with every loop that can split cut into parts,
// against one thread; returns how many cases ran and how many of them split.
std::pair<int, int> compare_thread_counts(const std::vector<GradCase>& cases) {
  auto cpu = exec::make_cpu_backend();
  int compared = 0, split_cases = 0;
  for (const GradCase& c : cases) {
    const uint64_t seed = std::hash<std::string>{}(c.name) % 100000;
    CaseGraphs cg = build_case(c, seed);
    bool library = false;
    for (const auto& n : cg.training.nodes) library = library || kLibraryKernels.count(n.op_type);
    if (library) continue;
    exec::RunOptions opts;
    opts.training = c.training;
    opts.seed = seed;
    std::map<std::string, ir::Tensor> want;
    {
      const ThreadSetting one(1, 1);
      want = exec::ForwardRunner(cg.training, *cpu).run({}, opts);
    }
    const int64_t forks = exec::cpu::parallel_forks();
    for (int threads : {2, 3}) {
      const ThreadSetting many(threads, 1);  // every loop of two aligned blocks splits
      auto got = exec::ForwardRunner(cg.training, *cpu).run({}, opts);
      for (const auto& [name, t] : want)
        EXPECT_TRUE(same_bits(got.at(name), t)) << c.name << " (seed " << seed << ") at " << threads
                                                << " threads: output " << name << " differs";
    }
    split_cases += exec::cpu::parallel_forks() > forks;
    ++compared;
  }
  return {compared, split_cases};
}

// Every case of the gradient table: rows (softmax, norms, losses) split there.
TEST(CpuThreads, EveryKernelGivesOneThreadsBitsAtTwoAndThreeThreads) {
  const auto [compared, split] = compare_thread_counts(grad_cases::all_cases());
  EXPECT_GT(compared, 100);
  EXPECT_GT(split, 15);
}

// Flat elementwise loops split on multiples of 16 elements, where one
// thread's loop would run its vector body too: an element in a loop's
// scalar tail may round otherwise (the compiler contracts its multiply-adds
// differently), so a split anywhere else would change bits (GeluGrad's did).
// Shapes here are large enough to split and leave tails (1517 = 37 x 41).
TEST(CpuThreads, LargeElementwiseNormAndSoftmaxCasesGiveOneThreadsBits) {
  using grad_cases::I;
  using grad_cases::Ints;
  using grad_cases::Is;
  using grad_cases::K;
  using grad_cases::S;
  const std::vector<GradCase> cases = {
      K("add", "Add", {P({37, 41}), P({37, 41})}),
      K("add_row", "Add", {P({37, 41}), P({41})}),
      K("mul_col", "Mul", {P({37, 41}), P({37, 1})}),
      K("div_bcast", "Div", {P({5, 37, 41}), P({37, 1}, Gen::kAwayFromZero)}),
      K("sub_scalar", "Sub", {P({37, 41}), P({1})}),
      K("relu", "Relu", {P({37, 41}, Gen::kAwayFromZero)}),
      K("gelu", "Gelu", {P({37, 41})}),
      K("gelu_tanh", "Gelu", {P({37, 41})}, {{"approximate", S("tanh")}}),
      K("sigmoid", "Sigmoid", {P({37, 41})}),
      K("tanh", "Tanh", {P({37, 41})}),
      K("exp", "Exp", {P({37, 41})}),
      K("erf", "Erf", {P({37, 41})}),
      K("sqrt", "Sqrt", {P({37, 41}, Gen::kPositive)}),
      K("softmax", "Softmax", {P({37, 41})}),
      K("log_softmax_strided", "LogSoftmax", {P({37, 41, 3})}, {{"axis", I(1)}}),
      K("layernorm", "LayerNormalization", {P({37, 41}), P({41}), P({41})}),
      K("batchnorm_train", "BatchNormalization",
        {P({9, 7, 5, 5}), P({7}, Gen::kPositive), P({7}), C(ir::Tensor(ir::DType::kF32, {7})),
         C(ir::Tensor::from_f32({1, 1, 1, 1, 1, 1, 1}, {7}))},
        {{"training_mode", I(1)}}),
      // Sums over the batch (bias gradients): columns split, rows in order.
      K("reduce_sum_batch", "ReduceSum", {P({5, 37, 41}), Ints({0})}, {{"keepdims", I(0)}}),
      K("reduce_mean_middle", "ReduceMean", {P({5, 37, 41})}, {{"axes", Is({1})}}),
      // Data movement: visits of disjoint rows and tiles.
      K("transpose_tiles", "Transpose", {P({3, 37, 41})}, {{"perm", Is({0, 2, 1})}}),
      K("transpose_rows", "Transpose", {P({37, 3, 41})}, {{"perm", Is({1, 0, 2})}}),
      K("slice_steps", "Slice",
        {P({37, 41}), Ints({1, 2}), Ints({36, 40}), Ints({0, 1}), Ints({1, 3})}),
      K("expand_rows", "Expand", {P({37, 1}), Ints({37, 41})}),
      // ResNet's stem pool (the general kernel) and LeNet's 2x2 (the halving one).
      K("maxpool_3x3_s2", "MaxPool", {P({3, 5, 13, 13}, Gen::kDistinct)},
        {{"kernel_shape", Is({3, 3})}, {"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}}),
      K("maxpool_2x2_s2", "MaxPool", {P({3, 5, 14, 14}, Gen::kDistinct)},
        {{"kernel_shape", Is({2, 2})}, {"strides", Is({2, 2})}}),
  };
  const auto [compared, split] = compare_thread_counts(cases);
  EXPECT_EQ(compared, static_cast<int>(cases.size()));
  EXPECT_EQ(split, compared);
}

// Adam over moments that underflow: every thread flushes denormals (MXCSR is
// per thread), so the moments are zero everywhere and the weights match one
// thread's.
TEST(CpuThreads, OptimizerStepsGiveOneThreadsBitsAndFlushDenormalsOnEveryThread) {
  const int64_t n = 1 << 16;
  ir::Tensor w(ir::DType::kF32, {n}), grad(ir::DType::kF32, {n});
  for (int64_t i = 0; i < n; ++i) {
    w.data<float>()[i] = 0.001f * static_cast<float>(i % 1000) - 0.5f;
    // Half tiny (beta-scaled moments fall below float's smallest normal), half ordinary.
    grad.data<float>()[i] = i % 2 ? 1e-38f : 0.01f * static_cast<float>(i % 37) - 0.18f;
  }
  std::map<std::string, ir::Tensor> runs[3];
  for (int threads : {1, 2, 3}) {
    const ThreadSetting setting(threads, 1024);
    for (const char* kind : {"adam", "sgd"}) {
      ir::Graph g;
      g.set_value("w", w.clone(), ir::Role::kParam);
      exec::OptimizerConfig cfg;
      cfg.kind = kind;
      cfg.momentum = cfg.kind == "sgd" ? 0.9 : 0.0;
      auto opt = exec::Optimizer::create(cfg, g, {"w"});
      for (int step = 0; step < 3; ++step) opt->step(g, {{"w", grad}}, 0.01);
      for (const std::string& s : opt->state_names("w"))
        runs[threads - 1][std::string(kind) + ":" + s] = *g.value(s);
      runs[threads - 1][std::string(kind) + ":w"] = *g.value("w");
    }
  }
  const float* m = runs[2].at("adam:w.exp_avg").data<float>();
  for (int64_t i = 1; i < n; i += 2) ASSERT_EQ(m[i], 0.0f) << "denormal moment kept at " << i;
  for (int threads : {2, 3})
    for (const auto& [name, t] : runs[0])
      EXPECT_TRUE(same_bits(runs[threads - 1].at(name), t))
          << name << " at " << threads << " threads";
}

}  // namespace
}  // namespace pipetrain::test
