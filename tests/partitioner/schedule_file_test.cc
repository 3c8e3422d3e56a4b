// Schedule files: every flush schedule of ours survives the trip through JSON and
// through torch.distributed.pipelining's CSV op for op; bad files get one message
// naming the file and the first bad action.
#include "partitioner/schedule_file.h"

#include <gtest/gtest.h>

#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "ir/error.h"
#include "partitioner/schedules.h"

namespace pipetrain::partitioner {
namespace {

bool same_ops(const Schedule& a, const Schedule& b, std::string* diff) {
  if (a.programs.size() != b.programs.size() || a.stage_workers != b.stage_workers ||
      a.num_stages != b.num_stages || a.num_microbatches != b.num_microbatches ||
      a.split_backward != b.split_backward) {
    *diff = "shape";
    return false;
  }
  for (size_t w = 0; w < a.programs.size(); ++w) {
    const auto &pa = a.programs[w], &pb = b.programs[w];
    for (size_t i = 0; i < std::max(pa.size(), pb.size()); ++i) {
      const std::string x = i < pa.size() ? to_string(pa[i]) : "end";
      const std::string y = i < pb.size() ? to_string(pb[i]) : "end";
      if (x != y) {
        *diff = fmt::format("worker {} op {}: {} against {}", w, i, x, y);
        return false;
      }
    }
  }
  return true;
}

// torch's action names: "<stage><F|I|B|W><mb>", its communication cells among them.
std::string as_torch_csv(const Schedule& s) {
  std::string out;
  for (const auto& prog : s.programs) {
    std::string line;
    for (const ScheduleOp& op : prog) {
      std::string cell;
      switch (op.kind) {
        case OpKind::kForward: cell = fmt::format("{}F{}", op.stage, op.microbatch); break;
        case OpKind::kBackward: cell = fmt::format("{}B{}", op.stage, op.microbatch); break;
        case OpKind::kBackwardInput: cell = fmt::format("{}I{}", op.stage, op.microbatch); break;
        case OpKind::kBackwardWeight: cell = fmt::format("{}W{}", op.stage, op.microbatch); break;
        case OpKind::kSend:
          cell = fmt::format("{}SEND_{}{}", op.stage,
                             op.payload == Payload::kActivation ? "F" : "B", op.microbatch);
          break;
        default: continue;  // receives (torch names them by the receiving stage), updates
      }
      line += (line.empty() ? "" : ",") + cell;
    }
    out += line + "\n";
  }
  return out;
}

TEST(ScheduleFile, OurFlushSchedulesRoundTripThroughJsonAndTorchCsv) {
  int checked = 0;
  for (ScheduleKind kind :
       {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kZeroBubbleH1,
        ScheduleKind::kInterleaved, ScheduleKind::kZeroBubbleV})
    for (int p : {1, 2, 3, 4})
      for (int m : {1, 4, 8}) {
        ScheduleShape shape;
        shape.replicas.assign(static_cast<size_t>(p), 1);
        shape.microbatches = m;
        if (kind == ScheduleKind::kInterleaved && m % p != 0) continue;
        const Schedule ours = build_schedule(kind, shape);
        const std::string what = fmt::format("{} p={} m={}", schedule_name(kind), p, m);
        std::string diff;
        const Schedule from_json = parse_schedule(schedule_to_json(ours), false, what);
        EXPECT_TRUE(same_ops(ours, from_json, &diff)) << what << " json: " << diff;
        EXPECT_EQ(from_json.name, ours.name);
        if (m > 1) {  // a CSV names microbatches by their actions: all must appear
          const Schedule from_csv = parse_schedule(as_torch_csv(ours), true, what);
          EXPECT_TRUE(same_ops(ours, from_csv, &diff)) << what << " csv: " << diff;
        }
        ++checked;
      }
  EXPECT_GT(checked, 50);
}

TEST(ScheduleFile, AsynchronousAndReplicatedSchedulesAreNotWritten) {
  ScheduleShape shape;
  shape.replicas = {1, 1};
  shape.microbatches = 4;
  EXPECT_THROW(schedule_to_json(build_schedule(ScheduleKind::kPipeDream, shape)), PlanError);
  shape.replicas = {2, 1};
  EXPECT_THROW(schedule_to_json(build_schedule(ScheduleKind::kOneFOneB, shape)), PlanError);
}

void expect_error(const std::string& text, bool csv, const std::string& message) {
  try {
    parse_schedule(text, csv, "mine.json");
    ADD_FAILURE() << "accepted: " << text;
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos)
        << e.what() << "\n  wanted: " << message;
    EXPECT_EQ(std::string(e.what()).rfind("mine.json", 0), 0u) << e.what();
  }
}

TEST(ScheduleFile, BadFilesNameTheirFirstBadAction) {
  const std::string ok = R"({"workers": [["F0.0", "F0.1", "B0.0", "B0.1"],
                                           ["F1.0", "B1.0", "F1.1", "B1.1"]]})";
  EXPECT_EQ(parse_schedule(ok, false, "mine.json").num_microbatches, 2);
  expect_error("{", false, "not JSON");
  expect_error(R"({"stages": 2})", false, "needs \"workers\"");
  expect_error(R"({"workers": [["F0.0", "X0.1"]]})", false,
               "worker 0, action 1: 'X0.1' is not an action");
  expect_error(R"({"workers": [["F0.0", "B0.0"], ["F1.0", "Bi1.0", "W1.0"]]})", false,
               "'B0.0' is a whole backward, but other backwards are split");
  expect_error(R"({"workers": [["F0.0", "B0.0"], ["F0.1", "B0.1"]]})", false,
               "stage 0 runs forwards on workers 0 and 1");
  expect_error(R"({"workers": [["F0.0", "B0.0", "B1.0"], ["F1.0"]]})", false,
               "worker 0 runs 'B1.0', but stage 1 lives on worker 1");
  expect_error(R"({"microbatches": 1, "workers": [["F0.0", "F0.1", "B0.0", "B0.1"]]})", false,
               "an action names microbatch 1, but the schedule has 1");
  expect_error(R"({"placement": [0], "workers": [["F0.0", "B0.0"], ["F1.0", "B1.0"]]})", false,
               "\"placement\" places 1 stages, the actions name 2");
  expect_error(R"({"workers": [["B0.0", "F0.0"]]})", false, "backward before its forward");
  expect_error(R"({"workers": [["F0.0", "F0.1", "B0.0"]]})", false, "B0.1");
  // Worker 1 waits for microbatch 1's activation, worker 0 for microbatch 0's gradient.
  expect_error(
      R"({"workers": [["F0.0", "B0.0", "F0.1", "B0.1"], ["F1.1", "B1.1", "F1.0", "B1.0"]]})", false,
      "deadlocks");
  expect_error("0F0,0Q0\n", true, "line 1, cell 2: '0Q0' is not an action");
}

}  // namespace
}  // namespace pipetrain::partitioner
