// Faults in a pipeline: an exception in one worker stops every worker within
// a second with the original message and the worker named (never a hang,
// also with senders blocked on full queues); a NaN loss stops the run naming
// the step; a non-finite gradient is caught before the update.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "autodiff/training_graph.h"
#include "executor/backend.h"
#include "executor/pipeline/pipeline.h"
#include "importer/importer.h"
#include "ir/error.h"
#include "models/zoo.h"
#include "tests/executor/test_models.h"

namespace pipetrain {
namespace {

using exec::TensorMap;
using partitioner::ScheduleKind;
using Clock = std::chrono::steady_clock;

constexpr int64_t kRows = 4, kFeatures = 8, kClasses = 3;

autodiff::TrainingGraph mlp() {
  return testing_models::zoo_mlp(kRows, kFeatures, {32, 32, 16}, kClasses, 5);
}

std::vector<TensorMap> microbatches(const autodiff::TrainingGraph& tg, int n) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<TensorMap> out;
  for (int b = 0; b < n; ++b) {
    ir::Tensor x(ir::DType::kF32, {kRows, kFeatures});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = normal(rng);
    std::vector<int64_t> y(kRows);
    for (auto& v : y) v = static_cast<int64_t>(rng() % kClasses);
    out.push_back({{tg.graph.inputs[0], x}, {tg.labels, ir::Tensor::from_i64(y, {kRows})}});
  }
  return out;
}

// Three stages over the MLP's 7 layers.
std::vector<exec::PipelineStage> three_stages() {
  return {{0, 1, 1}, {2, 3, 1}, {4, 6, 1}};
}

// Runs and returns the message and the seconds until run() threw.
std::pair<std::string, double> run_expecting_failure(exec::Pipeline& pipe,
                                                     const std::vector<TensorMap>& mbs) {
  const auto start = Clock::now();
  try {
    pipe.run(mbs);
  } catch (const Error& e) {
    return {e.what(), std::chrono::duration<double>(Clock::now() - start).count()};
  }
  ADD_FAILURE() << "the run did not fail";
  return {"", 0};
}

TEST(PipelineFaults, ExceptionInOneWorkerStopsAllWithinASecond) {
  for (ScheduleKind kind : {ScheduleKind::kPipeDream, ScheduleKind::kGPipe}) {
    // A tiny queue bound: upstream workers block in send as well as in recv.
    for (size_t queue : {size_t(1) << 30, size_t(64)}) {
      auto tg = mlp();
      exec::PipelineOptions po;
      po.schedule = kind;
      po.microbatches = 16;
      po.queue_bytes = queue;
      exec::Pipeline pipe(tg, three_stages(), po);
      auto mbs = microbatches(tg, 16);
      // Microbatch 9's labels have the wrong shape: the last stage throws.
      mbs[9][tg.labels] = ir::Tensor::from_i64({0, 1, 2}, {3});
      auto [msg, seconds] = run_expecting_failure(pipe, mbs);
      EXPECT_LT(seconds, 1.0) << msg;
      EXPECT_NE(msg.find("worker 2 (stage 2)"), std::string::npos) << msg;
      EXPECT_NE(msg.find("input '" + tg.labels + "'"), std::string::npos) << msg;
      // Unusable afterwards, with a clear message.
      try {
        pipe.run(microbatches(tg, 16));
        ADD_FAILURE() << "a failed pipeline ran again";
      } catch (const RuntimeFault& e) {
        EXPECT_NE(std::string(e.what()).find("earlier failure"), std::string::npos);
      }
    }
  }
}

TEST(PipelineFaults, NanLossStopsNamingTheStepAndStage) {
  auto tg = mlp();
  exec::PipelineOptions po;
  po.schedule = ScheduleKind::kPipeDream;
  exec::Pipeline pipe(tg, three_stages(), po);
  auto mbs = microbatches(tg, 8);
  mbs[5][tg.graph.inputs[0]].data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  auto [msg, seconds] = run_expecting_failure(pipe, mbs);
  EXPECT_LT(seconds, 1.0) << msg;
  EXPECT_NE(msg.find("worker 2 (stage 2)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("microbatch 5: the loss is NaN"), std::string::npos) << msg;
  // Minibatch 5 runs on stage 2 after the updates of minibatches 0..4.
  EXPECT_NE(msg.find("step 5,"), std::string::npos) << msg;
}

TEST(PipelineFaults, NonFiniteGradientStopsBeforeTheUpdate) {
  // Stage 0 of a two-stage cut on its own: a NaN in the gradient it
  // receives makes its weight gradients NaN while its own loss-free forward
  // is finite.
  auto tg = mlp();
  auto programs = exec::build_stage_programs(tg, {{0, 3}, {4, 6}});
  auto backend = exec::make_cpu_backend();
  exec::StageWorker sw(programs[0], tg, *backend, {});
  auto mbs = microbatches(tg, 2);
  for (int mb = 0; mb < 2; ++mb) {
    auto fwd = sw.forward(mb, 0, mbs[static_cast<size_t>(mb)], 0);
    TensorMap grads = mbs[static_cast<size_t>(mb)];
    for (const auto& tr : programs[0].recv_bwd) {
      const auto& d = tg.graph.tensor(tr.tensor);
      ir::Tensor g(d.dtype, d.shape);
      for (int64_t i = 0; i < g.numel(); ++i)
        g.data<float>()[i] = mb == 1 ? std::numeric_limits<float>::infinity() : 0.5f;
      grads[tr.tensor] = g;
    }
    sw.backward(mb, grads);
    sw.seal_gradients(mb);
    EXPECT_EQ(sw.gradients_finite(mb), mb == 0) << "microbatch " << mb;
  }
}

}  // namespace
}  // namespace pipetrain
