#include "partitioner/schedule.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "ir/error.h"

namespace pipetrain::partitioner {

std::string to_string(const ScheduleOp& op) {
  const char* what = op.payload == Payload::kActivation ? "act" : "grad";
  switch (op.kind) {
    case OpKind::kForward: return fmt::format("F{}.{}", op.stage, op.microbatch);
    case OpKind::kBackward: return fmt::format("B{}.{}", op.stage, op.microbatch);
    case OpKind::kBackwardInput: return fmt::format("Bi{}.{}", op.stage, op.microbatch);
    case OpKind::kBackwardWeight:
      if (op.microbatch == kWholeStep) return fmt::format("W{}.all", op.stage);
      return fmt::format("W{}.{}", op.stage, op.microbatch);
    case OpKind::kSend:
      return fmt::format("Send({} {}.{} -> w{})", what, op.stage, op.microbatch, op.peer);
    case OpKind::kRecv:
      return fmt::format("Recv({} {}.{} <- w{})", what, op.stage, op.microbatch, op.peer);
    case OpKind::kAllreduce: return fmt::format("Allreduce{}#{}", op.stage, op.microbatch);
    case OpKind::kStep: return fmt::format("Step{}#{}", op.stage, op.microbatch);
  }
  return "?";
}

namespace {

bool is_compute(OpKind k) {
  return k == OpKind::kForward || k == OpKind::kBackward || k == OpKind::kBackwardInput ||
         k == OpKind::kBackwardWeight;
}

// (payload, producer stage, microbatch, from, to): one message.
using MessageKey = std::tuple<int, int, int, int, int>;

struct MemoryTracker {
  // Per worker and stage: microbatches whose forward ran and whose last
  // backward op has not, with the weight version their forward used.
  std::map<std::pair<int, int>, std::map<int, int>> live;  // (w, s) -> mb -> version
  std::map<std::pair<int, int>, int> version;              // (w, s) -> current version
  std::vector<int> in_flight, peak_in_flight, peak_versions;
  std::vector<double> bytes, peak_bytes;
  explicit MemoryTracker(size_t workers)
      : in_flight(workers, 0),
        peak_in_flight(workers, 0),
        peak_versions(workers, 0),
        bytes(workers, 0),
        peak_bytes(workers, 0) {}

  void count_versions(int w, int s) {
    std::set<int> versions = {version[{w, s}]};
    for (const auto& [mb, v] : live[{w, s}]) versions.insert(v);
    peak_versions[w] = std::max(peak_versions[w], static_cast<int>(versions.size()));
  }
  void stash(int w, int s, int mb, double b) {
    live[{w, s}][mb] = version[{w, s}];
    ++in_flight[w];
    bytes[w] += b;
    peak_in_flight[w] = std::max(peak_in_flight[w], in_flight[w]);
    peak_bytes[w] = std::max(peak_bytes[w], bytes[w]);
    count_versions(w, s);
  }
  void release(int w, int s, int mb, double b) {
    if (live[{w, s}].erase(mb)) {
      --in_flight[w];
      bytes[w] -= b;
    }
  }
  /// Every microbatch of stage s on w (a batched W op); returns how many.
  int release_all(int w, int s, double b) {
    const int n = static_cast<int>(live[{w, s}].size());
    live[{w, s}].clear();
    in_flight[w] -= n;
    bytes[w] -= n * b;
    return n;
  }
  /// Bytes held outside the stashes, e.g. from a B op to its W op.
  void hold(int w, double b) {
    bytes[w] += b;
    peak_bytes[w] = std::max(peak_bytes[w], bytes[w]);
  }
  void step(int w, int s) {
    ++version[{w, s}];
    count_versions(w, s);
  }
};

}  // namespace

int tied_delay(const std::vector<int>& stages, int from) {
  return *std::max_element(stages.begin(), stages.end()) - from;
}

ScheduleRun execute(const Schedule& s, const ScheduleCosts& costs) {
  const size_t workers = s.programs.size();
  ScheduleRun run;
  run.busy_s.assign(workers, 0.0);
  std::vector<size_t> pc(workers, 0);
  std::vector<double> clock(workers, 0.0);
  std::map<MessageKey, double> arrivals;            // message -> arrival time
  std::map<std::pair<int, int>, double> link_free;  // (from, to) -> free time
  MemoryTracker memory(workers);
  // Gradient allreduces run on each worker's collective stream (like a NCCL
  // stream beside compute): issuing one does not block the worker; it starts
  // once every replica has issued it and the replicas' streams are free. A
  // Step after an allreduce of the same (stage, round) waits for it to end.
  std::vector<double> stream_free(workers, 0.0);
  std::map<std::pair<int, int>, std::vector<std::pair<int, double>>> issued;  // -> (w, time)
  std::map<std::pair<int, int>, double> reduced;  // (stage, round) -> end
  std::set<std::tuple<int, int, int>> issued_by;  // (worker, stage, round)
  // Tied groups: a Step of a tied stage first records its worker's arrival
  // (not an op), then runs once every stage of the group has arrived.
  std::vector<int> tie_of(static_cast<size_t>(s.num_stages), -1);
  for (size_t g = 0; g < s.tied_groups.size(); ++g)
    for (int st : s.tied_groups[g]) tie_of.at(static_cast<size_t>(st)) = static_cast<int>(g);
  std::map<std::pair<int, int>, std::vector<double>> tied_arrivals;  // (group, step) -> times
  std::vector<bool> tied_waiting(workers, false);
  auto tied_start = [&](int group, int step) {
    size_t expected = 0;  // every replica of every stage in the group
    for (int st : s.tied_groups[group]) expected += s.stage_workers.at(st).size();
    const auto it = tied_arrivals.find({group, step});
    if (it == tied_arrivals.end() || it->second.size() < expected)
      return std::numeric_limits<double>::quiet_NaN();
    const double last = *std::max_element(it->second.begin(), it->second.end());
    return last + (costs.tied_allreduce ? costs.tied_allreduce(group) : 0.0);
  };
  // Delayed ties: a Step arrives (sending its partial), then waits for the
  // other stages' partials it takes; tied_arrivals then holds each
  // (group, stage's step) as (group, step * stages + stage).
  auto sealed_key = [&](int group, int stage, int step) {
    return std::make_pair(group, step * s.num_stages + stage);
  };
  auto delayed_start = [&](int group, int stage, int step) {
    const auto& members = s.tied_groups[group];
    const bool last = step == s.num_microbatches - 1;
    double start = 0;
    for (int other : members) {
      if (other == stage) continue;
      const int j = last ? step : step - tied_delay(members, other);
      if (j < 0) continue;
      const auto it = tied_arrivals.find(sealed_key(group, other, j));
      if (it == tied_arrivals.end() || it->second.size() < s.stage_workers.at(other).size())
        return std::numeric_limits<double>::quiet_NaN();
      start = std::max(start, *std::max_element(it->second.begin(), it->second.end()) +
                                  (costs.tied_allreduce ? costs.tied_allreduce(group) : 0.0));
    }
    return start;
  };
  auto act_bytes = [&](int stage) {
    return costs.activation_bytes ? costs.activation_bytes(stage) : 1.0;
  };
  auto weight_act_bytes = [&](int stage) {
    return costs.weight_activation_bytes
               ? std::min(costs.weight_activation_bytes(stage), act_bytes(stage))
               : act_bytes(stage);
  };
  auto key_of = [](const ScheduleOp& op, int from, int to) {
    return MessageKey{static_cast<int>(op.payload), op.stage, op.microbatch, from, to};
  };

  size_t remaining = 0;
  for (const auto& p : s.programs) remaining += p.size();
  while (remaining > 0) {
    // Pick the ready op with the earliest start: links then serve sends in
    // time order, as they would on a real machine.
    int pick = -1;
    double pick_start = std::numeric_limits<double>::infinity();
    for (size_t w = 0; w < workers; ++w) {
      if (pc[w] >= s.programs[w].size()) continue;
      const ScheduleOp& op = s.programs[w][pc[w]];
      double start = clock[w];
      if (op.kind == OpKind::kRecv) {
        auto it = arrivals.find(key_of(op, op.peer, static_cast<int>(w)));
        if (it == arrivals.end()) continue;
        start = std::max(start, it->second);
      } else if (op.kind == OpKind::kStep &&
                 issued_by.count({static_cast<int>(w), op.stage, op.microbatch})) {
        auto it = reduced.find({op.stage, op.microbatch});
        if (it == reduced.end()) continue;  // some replica has not issued it yet
        start = std::max(start, it->second);
      }
      if (op.kind == OpKind::kStep && tie_of[op.stage] >= 0 && tied_waiting[w]) {
        const double met = s.tied_delayed ? delayed_start(tie_of[op.stage], op.stage, op.microbatch)
                                          : tied_start(tie_of[op.stage], op.microbatch);
        if (std::isnan(met)) continue;  // a tied stage has not arrived yet
        start = std::max(start, met);
      }
      if (start < pick_start) pick_start = start, pick = static_cast<int>(w);
    }
    if (pick < 0) {
      std::string blocked;
      for (size_t w = 0; w < workers; ++w)
        if (pc[w] < s.programs[w].size())
          blocked += fmt::format("{}w{} at {}", blocked.empty() ? "" : ", ", w,
                                 to_string(s.programs[w][pc[w]]));
      throw PlanError("schedule '" + s.name + "' deadlocks: " + blocked);
    }
    const int w = pick;
    const ScheduleOp& op = s.programs[w][pc[w]];
    switch (op.kind) {
      case OpKind::kRecv:
        clock[w] = pick_start;
        ++pc[w], --remaining;
        break;
      case OpKind::kSend: {
        if (op.peer == w) {  // to a chunk of its own (a V's bend): handed over in memory
          arrivals[key_of(op, w, w)] = clock[w];
          ++pc[w], --remaining;
          break;
        }
        double& free = link_free[{w, op.peer}];
        double start = std::max(clock[w], free);
        double dur = costs.transfer ? costs.transfer(w, op.peer, op) : 0.0;
        free = start + dur;
        arrivals[key_of(op, w, op.peer)] = start + dur;
        run.transfers.push_back({w, op.peer, op, start, start + dur});
        ++pc[w], --remaining;
        break;
      }
      case OpKind::kAllreduce: {
        auto& who = issued[{op.stage, op.microbatch}];
        who.push_back({w, pick_start});
        issued_by.insert({w, op.stage, op.microbatch});
        clock[w] = pick_start;
        ++pc[w], --remaining;
        const auto& reps = s.stage_workers.at(op.stage);
        if (who.size() == reps.size()) {
          double start = 0;
          for (const auto& [r, t] : who) start = std::max({start, t, stream_free[r]});
          double end = start + (costs.allreduce ? costs.allreduce(op.stage, op.microbatch) : 0.0);
          for (const auto& [r, t] : who) {
            run.ops.push_back({r, op, start, end});
            stream_free[r] = end;
          }
          reduced[{op.stage, op.microbatch}] = end;
          run.makespan = std::max(run.makespan, end);
        }
        break;
      }
      default: {
        if (op.kind == OpKind::kStep && tie_of[op.stage] >= 0 && !tied_waiting[w]) {
          tied_arrivals[s.tied_delayed ? sealed_key(tie_of[op.stage], op.stage, op.microbatch)
                                       : std::make_pair(tie_of[op.stage], op.microbatch)]
              .push_back(pick_start);
          tied_waiting[w] = true;
          clock[w] = pick_start;
          break;
        }
        tied_waiting[w] = false;
        double dur = costs.compute ? costs.compute(w, op) : 0.0;
        run.ops.push_back({w, op, pick_start, pick_start + dur});
        clock[w] = pick_start + dur;
        if (is_compute(op.kind)) run.busy_s[w] += dur;
        // A microbatch's stash lives until its last backward op.
        bool release =
            s.split(op.stage) ? op.kind == OpKind::kBackwardWeight : op.kind == OpKind::kBackward;
        if (op.kind == OpKind::kBackwardInput && costs.carry_bytes)
          memory.hold(w, costs.carry_bytes(op.stage));
        // A split backward frees at B what its W does not read.
        if (op.kind == OpKind::kBackwardInput)
          memory.hold(w, -(act_bytes(op.stage) - weight_act_bytes(op.stage)));
        if (op.kind == OpKind::kBackwardWeight && op.microbatch == kWholeStep) {
          const int n = memory.release_all(w, op.stage, weight_act_bytes(op.stage));
          if (costs.carry_bytes) memory.hold(w, -n * costs.carry_bytes(op.stage));
        } else if (op.kind == OpKind::kBackwardWeight && costs.carry_bytes) {
          memory.hold(w, -costs.carry_bytes(op.stage));
        }
        if (op.kind == OpKind::kForward)
          memory.stash(w, op.stage, op.microbatch, act_bytes(op.stage));
        else if (release)
          memory.release(w, op.stage, op.microbatch,
                         s.split(op.stage) ? weight_act_bytes(op.stage) : act_bytes(op.stage));
        else if (op.kind == OpKind::kStep)
          memory.step(w, op.stage);
        ++pc[w], --remaining;
      }
    }
  }
  for (size_t w = 0; w < workers; ++w) run.makespan = std::max(run.makespan, clock[w]);
  for (const auto& t : run.transfers) run.makespan = std::max(run.makespan, t.end);
  run.peak_in_flight = memory.peak_in_flight;
  run.peak_activation_bytes = memory.peak_bytes;
  run.peak_weight_versions = memory.peak_versions;
  for (auto& v : run.peak_weight_versions) v = std::max(v, 1);
  return run;
}

void validate(const Schedule& s) {
  const int workers = static_cast<int>(s.programs.size());
  if (s.num_stages < 1 || static_cast<int>(s.stage_workers.size()) != s.num_stages)
    throw PlanError("schedule '" + s.name + "': stage_workers must list every stage");
  std::map<std::tuple<int, int, int>, int> done;  // (kind, stage, mb) -> worker
  std::map<MessageKey, int> sends, recvs;
  for (int w = 0; w < workers; ++w) {
    std::set<std::tuple<int, int, int>> seen_here;  // (kind, stage, mb) run on w so far
    std::set<std::tuple<int, int, int>> received;   // (payload, stage, mb) received on w
    for (const ScheduleOp& op : s.programs[w]) {
      std::string where = fmt::format("schedule '{}' worker {} op {}", s.name, w, to_string(op));
      if (op.stage < 0 || op.stage >= s.num_stages) throw PlanError(where + ": stage out of range");
      if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
        // A worker may send to itself: one chunk to another (a V's bend).
        if (op.peer < 0 || op.peer >= workers) throw PlanError(where + ": bad peer");
        MessageKey k{static_cast<int>(op.payload), op.stage, op.microbatch,
                     op.kind == OpKind::kSend ? w : op.peer,
                     op.kind == OpKind::kSend ? op.peer : w};
        if (++(op.kind == OpKind::kSend ? sends : recvs)[k] > 1)
          throw PlanError(where + ": duplicated");
        if (op.kind == OpKind::kRecv)
          received.insert({static_cast<int>(op.payload), op.stage, op.microbatch});
        continue;
      }
      if (op.kind == OpKind::kAllreduce || op.kind == OpKind::kStep) continue;
      const auto& reps = s.stage_workers[op.stage];
      if (std::find(reps.begin(), reps.end(), w) == reps.end())
        throw PlanError(where + ": worker is not a replica of the stage");
      if (op.kind == OpKind::kBackwardWeight && s.batched(op.stage)) {
        if (op.microbatch != kWholeStep)
          throw PlanError(where + ": batched weight gradients run one W over the whole step");
        if (reps.size() != 1)
          throw PlanError(where + ": batched weight gradients need an unreplicated stage");
        for (int mb = 0; mb < s.num_microbatches; ++mb)
          if (!seen_here.count({static_cast<int>(OpKind::kBackwardInput), op.stage, mb}))
            throw PlanError(where + ": runs before " +
                            to_string(ScheduleOp{OpKind::kBackwardInput, op.stage, mb}));
        if (!done.emplace(std::tuple{static_cast<int>(op.kind), op.stage, kWholeStep}, w).second)
          throw PlanError(where + ": runs more than once");
        continue;
      }
      if (op.microbatch < 0 || op.microbatch >= s.num_microbatches)
        throw PlanError(where + ": microbatch out of range");
      auto key = std::tuple{static_cast<int>(op.kind), op.stage, op.microbatch};
      if (!done.emplace(key, w).second) throw PlanError(where + ": runs more than once");
      auto ran = [&](OpKind k) {
        return seen_here.count({static_cast<int>(k), op.stage, op.microbatch}) != 0;
      };
      bool needs_input = false;
      int from_stage = 0;
      Payload payload = Payload::kActivation;
      if (op.kind == OpKind::kForward) {
        needs_input = op.stage > 0, from_stage = op.stage - 1;
      } else if (op.kind == OpKind::kBackward || op.kind == OpKind::kBackwardInput) {
        if (!ran(OpKind::kForward)) throw PlanError(where + ": backward before its forward");
        needs_input = op.stage < s.num_stages - 1, from_stage = op.stage + 1;
        payload = Payload::kGradient;
      } else if (op.kind == OpKind::kBackwardWeight && !ran(OpKind::kBackwardInput)) {
        throw PlanError(where + ": weight gradient before the input gradient");
      }
      if (needs_input) {
        // The input comes from another worker (a Recv) or from this one.
        bool local =
            seen_here.count({static_cast<int>(payload == Payload::kActivation
                                                  ? OpKind::kForward
                                                  : (s.split(from_stage) ? OpKind::kBackwardInput
                                                                         : OpKind::kBackward)),
                             from_stage, op.microbatch}) != 0;
        bool got = received.count({static_cast<int>(payload), from_stage, op.microbatch}) != 0;
        if (!local && !got) throw PlanError(where + ": its input is never received before it");
      }
      seen_here.insert(key);
    }
  }
  for (int st = 0; st < s.num_stages; ++st) {
    if (s.batched(st) && !done.count({static_cast<int>(OpKind::kBackwardWeight), st, kWholeStep}))
      throw PlanError(fmt::format("schedule '{}': {} never runs", s.name,
                                  to_string(ScheduleOp{OpKind::kBackwardWeight, st, kWholeStep})));
    for (int mb = 0; mb < s.num_microbatches; ++mb) {
      std::vector<OpKind> kinds =
          s.batched(st) ? std::vector{OpKind::kForward, OpKind::kBackwardInput}
          : s.split_backward
              ? std::vector{OpKind::kForward, OpKind::kBackwardInput, OpKind::kBackwardWeight}
              : std::vector{OpKind::kForward, OpKind::kBackward};
      for (OpKind k : kinds)
        if (!done.count({static_cast<int>(k), st, mb}))
          throw PlanError(fmt::format("schedule '{}': {} never runs", s.name,
                                      to_string(ScheduleOp{k, st, mb})));
    }
  }
  for (const auto& [k, n] : sends)
    if (!recvs.count(k))
      throw PlanError(fmt::format("schedule '{}': a send from w{} to w{} is never received", s.name,
                                  std::get<3>(k), std::get<4>(k)));
  for (const auto& [k, n] : recvs)
    if (!sends.count(k))
      throw PlanError(fmt::format("schedule '{}': w{} waits for a message w{} never sends", s.name,
                                  std::get<4>(k), std::get<3>(k)));
  execute(s, {});
}

}  // namespace pipetrain::partitioner
