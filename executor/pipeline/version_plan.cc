#include "executor/pipeline/version_plan.h"

#include <algorithm>
#include <map>
#include <string>

#include "ir/error.h"

namespace pipetrain::exec {

using partitioner::OpKind;

std::vector<WorkerVersions> plan_versions(const partitioner::Schedule& s, VersionRule rule,
                                          int microbatches_per_step) {
  if (rule == VersionRule::kVerticalSync)
    for (const auto& ws : s.stage_workers)
      if (ws.size() != 1)
        throw PlanError("vertical sync needs unreplicated stages (replicas update out of step)");
  std::vector<WorkerVersions> out(s.programs.size());
  // Pass 1: updates before each op; the latest-rule version of every forward.
  std::map<int, int64_t> stage0_version;  // microbatch -> version stage 0's forward used
  for (size_t w = 0; w < s.programs.size(); ++w) {
    const auto& prog = s.programs[w];
    WorkerVersions& v = out[w];
    int64_t updates = 0;
    for (const auto& op : prog) {
      v.updates_before.push_back(updates);
      v.forward_version.push_back(op.kind == OpKind::kForward ? updates : -1);
      if (op.kind == OpKind::kForward && op.stage == 0) stage0_version[op.microbatch] = updates;
      if (op.kind == OpKind::kStep) ++updates;
    }
  }
  // Pass 2: the rule's version, checked against what exists at that point.
  for (size_t w = 0; w < s.programs.size(); ++w) {
    const auto& prog = s.programs[w];
    WorkerVersions& v = out[w];
    for (size_t i = 0; i < prog.size(); ++i) {
      const auto& op = prog[i];
      if (op.kind != OpKind::kForward) continue;
      int64_t want = v.forward_version[i];
      if (rule == VersionRule::kVerticalSync) want = stage0_version.at(op.microbatch);
      if (rule == VersionRule::kTwoBW)
        want = std::max<int64_t>(0, op.microbatch / std::max(1, microbatches_per_step) - 1);
      if (want > v.updates_before[i])
        throw PlanError(partitioner::to_string(op) + " on worker " + std::to_string(w) +
                        " needs weight version " + std::to_string(want) + " but only " +
                        std::to_string(v.updates_before[i]) + " updates are applied by then" +
                        (rule == VersionRule::kTwoBW
                             ? " (2bw needs at least as many microbatches per step as stages)"
                             : ""));
      v.forward_version[i] = want;
    }
    v.min_future.assign(prog.size() + 1, kNoFutureVersion);
    for (size_t i = prog.size(); i-- > 0;)
      v.min_future[i] = v.forward_version[i] >= 0
                            ? std::min(v.min_future[i + 1], v.forward_version[i])
                            : v.min_future[i + 1];
  }
  return out;
}

}  // namespace pipetrain::exec
