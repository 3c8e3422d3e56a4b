// Every schedule builder, over pipelines of 1 to 16 stages and 1 to 64
// microbatches (and a few replicated shapes), yields a schedule the validator
// proves complete and deadlock-free: issue 4's requirement before anything
// runs a schedule on real workers.
#include <gtest/gtest.h>

#include <algorithm>

#include "ir/error.h"
#include "partitioner/schedules.h"

namespace pipetrain::partitioner {
namespace {

TEST(ScheduleSweep, EveryBuilderValidatesUpTo16StagesAnd64Microbatches) {
  int validated = 0;
  for (ScheduleKind kind : all_schedule_kinds())
    for (int p : {1, 2, 3, 4, 5, 8, 16})
      for (int m : {1, 2, 3, 7, 8, 16, 63, 64}) {
        ScheduleShape shape;
        shape.replicas.assign(static_cast<size_t>(p), 1);
        shape.microbatches = m;
        Schedule s;
        try {
          s = build_schedule(kind, shape);
        } catch (const PlanError&) {
          // Interleaved refuses microbatch counts its stages do not divide; nothing else may.
          EXPECT_EQ(kind, ScheduleKind::kInterleaved)
              << schedule_name(kind) << " p=" << p << " m=" << m;
          continue;
        }
        EXPECT_NO_THROW(validate(s)) << schedule_name(kind) << " p=" << p << " m=" << m;
        ++validated;
      }
  EXPECT_GT(validated, 300);
}

TEST(ScheduleSweep, ReplicatedShapesValidate) {
  const std::vector<std::vector<int>> shapes = {{2, 1}, {1, 2}, {15, 1}, {2, 3, 1}, {4, 4, 4, 4}};
  for (ScheduleKind kind : all_schedule_kinds()) {
    if (kind == ScheduleKind::kInterleaved || kind == ScheduleKind::kZeroBubbleH2 ||
        v_shaped(kind)) {
      ScheduleShape replicated;
      replicated.replicas = {2, 1};
      EXPECT_THROW(build_schedule(kind, replicated), PlanError) << schedule_name(kind);
      continue;  // unreplicated stages only
    }
    for (const auto& replicas : shapes)
      for (int m : {1, 3, 8, 64}) {
        ScheduleShape shape;
        shape.replicas = replicas;
        shape.microbatches = m;
        const int widest = *std::max_element(replicas.begin(), replicas.end());
        if (kind == ScheduleKind::kTwoBW && m < widest) {
          // 2BW steps every m microbatches, so every replica needs one per step.
          EXPECT_THROW(build_schedule(kind, shape), PlanError);
          continue;
        }
        EXPECT_NO_THROW(validate(build_schedule(kind, shape)))
            << schedule_name(kind) << " replicas " << replicas.size() << " m=" << m;
      }
  }
}

}  // namespace
}  // namespace pipetrain::partitioner
