// Pipeline workers on cores of their own (executor/pipeline/core_pinning.h):
// the groups are consecutive, disjoint runs of the allowed CPUs; a pinned
// thread runs only there and the threads it starts (an OpenMP team) inherit
// its mask; a pipeline pins its workers as PinWorkers says (auto: only when
// they take every allowed CPU), and pinned or floating, trains the same bits.
#include "executor/pipeline/core_pinning.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "executor/pipeline/pipeline.h"
#include "ir/error.h"
#include "tests/executor/test_models.h"

namespace pipetrain {
namespace {

TEST(CorePinning, GroupsAreConsecutiveDisjointRunsOfTheAllowedCpus) {
  const std::vector<int> cpus = exec::allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  const int n = static_cast<int>(cpus.size());
  for (int threads = 1; threads <= n; ++threads) {
    const int workers = n / threads;
    const auto groups = exec::worker_core_groups(workers, threads);
    ASSERT_EQ(groups.size(), static_cast<size_t>(workers)) << threads << " threads";
    std::vector<int> flat;
    for (const auto& g : groups) {
      EXPECT_EQ(g.size(), static_cast<size_t>(threads));
      flat.insert(flat.end(), g.begin(), g.end());
    }
    EXPECT_EQ(flat, std::vector<int>(cpus.begin(), cpus.begin() + workers * threads));
  }
  EXPECT_TRUE(exec::worker_core_groups(n + 1, 1).empty()) << "more workers than cores";
  EXPECT_TRUE(exec::worker_core_groups(1, n + 1).empty()) << "more threads than cores";
  EXPECT_TRUE(exec::worker_core_groups(0, 1).empty());
}

TEST(CorePinning, APinnedThreadAndTheThreadsItStartsRunOnItsCores) {
  const std::vector<int> cpus = exec::allowed_cpus();
  const int target = cpus.back();
  std::vector<int> seen_mask, child_mask;
  int seen_cpu = -1;
  bool pinned = false;
  std::thread t([&] {
    pinned = exec::pin_calling_thread({target});
    seen_mask = exec::allowed_cpus();
    std::this_thread::yield();
    seen_cpu = sched_getcpu();
    std::thread child([&] { child_mask = exec::allowed_cpus(); });
    child.join();
  });
  t.join();
  ASSERT_TRUE(pinned);
  EXPECT_EQ(seen_mask, std::vector<int>{target});
  EXPECT_EQ(seen_cpu, target);
  EXPECT_EQ(child_mask, std::vector<int>{target}) << "a thread started by a pinned one";
  EXPECT_EQ(exec::allowed_cpus(), cpus) << "the calling thread is left as it was";
  EXPECT_TRUE(exec::pin_calling_thread({})) << "no cores: nothing to do";
}

// Two stages of the zoo's MLP under 1f1b-flush, 2 steps of 2 microbatches.
std::vector<ir::Tensor> train_two_steps(exec::PinWorkers pin,
                                        std::vector<std::vector<int>>* cores) {
  auto tg = testing_models::zoo_mlp(4, 12, {16, 16}, 5, 3);
  exec::PipelineOptions po;
  po.schedule = partitioner::ScheduleKind::kOneFOneB;
  po.microbatches = 2;
  po.optimizer.lr = 0.05;
  po.optimizer.momentum = 0.9;
  po.pin_workers = pin;
  const int layers = static_cast<int>(tg.graph.layers.size());
  exec::Pipeline pipe(tg, {{0, layers / 2 - 1, 1}, {layers / 2, layers - 1, 1}}, po);
  *cores = pipe.worker_cores();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (int step = 0; step < 2; ++step) {
    std::vector<exec::TensorMap> mbs;
    for (int m = 0; m < 2; ++m) {
      ir::Tensor x(ir::DType::kF32, {4, 12});
      for (int64_t k = 0; k < x.numel(); ++k) x.data<float>()[k] = normal(rng);
      std::vector<int64_t> y(4);
      for (auto& v : y) v = static_cast<int64_t>(rng() % 5);
      mbs.push_back({{tg.graph.inputs[0], x}, {tg.labels, ir::Tensor::from_i64(y, {4})}});
    }
    pipe.run(mbs);
  }
  auto out = testing_models::zoo_mlp(4, 12, {16, 16}, 5, 3);
  pipe.write_back(out.graph);
  std::vector<ir::Tensor> params;
  for (const auto& name : out.graph.params()) params.push_back(*out.graph.value(name));
  return params;
}

TEST(CorePinning, APipelinePinsItsWorkersAsToldAndTrainsTheSameBits) {
  const std::vector<int> cpus = exec::allowed_cpus();
  std::vector<std::vector<int>> on_cores, auto_cores, off_cores;
  const auto on = train_two_steps(exec::PinWorkers::kOn, &on_cores);
  const auto automatic = train_two_steps(exec::PinWorkers::kAuto, &auto_cores);
  const auto off = train_two_steps(exec::PinWorkers::kOff, &off_cores);
  const std::vector<std::vector<int>> first_two =
      cpus.size() >= 2 ? std::vector<std::vector<int>>{{cpus[0]}, {cpus[1]}}
                       : std::vector<std::vector<int>>{};
  EXPECT_EQ(on_cores, first_two) << "on: whenever the two workers fit";
  EXPECT_EQ(auto_cores, cpus.size() == 2 ? first_two : std::vector<std::vector<int>>{})
      << "auto: only when they take every allowed CPU";
  EXPECT_TRUE(off_cores.empty());
  ASSERT_EQ(on.size(), off.size());
  ASSERT_FALSE(on.empty());
  for (size_t i = 0; i < on.size(); ++i) {
    EXPECT_EQ(std::memcmp(on[i].raw(), off[i].raw(), on[i].nbytes()), 0) << "param " << i;
    EXPECT_EQ(std::memcmp(automatic[i].raw(), off[i].raw(), on[i].nbytes()), 0) << "param " << i;
  }
}

TEST(CorePinning, AutoBindsOnlyWorkersThatTakeEveryAllowedCpu) {
  const int n = static_cast<int>(exec::allowed_cpus().size());
  EXPECT_EQ(exec::pinned_core_groups(exec::PinWorkers::kAuto, n, 1),
            exec::worker_core_groups(n, 1));
  EXPECT_FALSE(exec::pinned_core_groups(exec::PinWorkers::kAuto, n, 1).empty());
  if (n >= 2) {
    EXPECT_TRUE(exec::pinned_core_groups(exec::PinWorkers::kAuto, n - 1, 1).empty());
    EXPECT_EQ(exec::pinned_core_groups(exec::PinWorkers::kOn, n - 1, 1).size(),
              static_cast<size_t>(n - 1));
  }
  EXPECT_TRUE(exec::pinned_core_groups(exec::PinWorkers::kOff, n, 1).empty());
  EXPECT_TRUE(exec::pinned_core_groups(exec::PinWorkers::kOn, n + 1, 1).empty());
  EXPECT_EQ(exec::parse_pin_workers("auto"), exec::PinWorkers::kAuto);
  EXPECT_EQ(exec::parse_pin_workers("off"), exec::PinWorkers::kOff);
  EXPECT_THROW(exec::parse_pin_workers("yes"), ModelError);
}

}  // namespace
}  // namespace pipetrain
