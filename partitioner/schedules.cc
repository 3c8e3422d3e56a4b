#include "partitioner/schedules.h"

#include <fmt/core.h>

#include <algorithm>
#include <deque>

#include "ir/error.h"
#include "partitioner/list_schedule.h"
#include "partitioner/schedule_file.h"

namespace pipetrain::partitioner {

const char* schedule_name(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::kGPipe: return "gpipe";
    case ScheduleKind::kOneFOneB: return "1f1b";
    case ScheduleKind::kPipeDream: return "pipedream";
    case ScheduleKind::kTwoBW: return "2bw";
    case ScheduleKind::kInterleaved: return "interleaved";
    case ScheduleKind::kZeroBubbleH1: return "zb-h1";
    case ScheduleKind::kZeroBubbleH2: return "zb-h2";
    case ScheduleKind::kZeroBubbleV: return "zb-v";
    case ScheduleKind::kDualPipeV: return "dualpipev";
    case ScheduleKind::kVHalf: return "v-half";
    case ScheduleKind::kFromFile: return "file";
  }
  return "?";
}

bool tied_gradients_delayed(ScheduleKind kind, bool synced_updates) {
  return kind == ScheduleKind::kPipeDream && !synced_updates;
}

std::vector<ScheduleKind> all_schedule_kinds() {
  return {ScheduleKind::kGPipe,        ScheduleKind::kOneFOneB,    ScheduleKind::kPipeDream,
          ScheduleKind::kTwoBW,        ScheduleKind::kInterleaved, ScheduleKind::kZeroBubbleH1,
          ScheduleKind::kZeroBubbleH2, ScheduleKind::kZeroBubbleV, ScheduleKind::kDualPipeV,
          ScheduleKind::kVHalf};
}

bool flush_schedule(ScheduleKind kind) {
  return kind != ScheduleKind::kPipeDream && kind != ScheduleKind::kTwoBW;
}

bool splits_backward(ScheduleKind kind) {
  return kind == ScheduleKind::kZeroBubbleH1 || kind == ScheduleKind::kZeroBubbleH2 ||
         v_shaped(kind);
}

bool v_shaped(ScheduleKind kind) {
  return kind == ScheduleKind::kZeroBubbleV || kind == ScheduleKind::kDualPipeV ||
         kind == ScheduleKind::kVHalf;
}

int chunks_per_worker(ScheduleKind kind, int chunks) {
  if (v_shaped(kind)) return 2;
  return kind == ScheduleKind::kInterleaved ? chunks : 1;
}

ChunkPlace place_chunk(ScheduleKind kind, int stage, int workers) {
  if (v_shaped(kind))
    return stage < workers ? ChunkPlace{stage, 0} : ChunkPlace{2 * workers - 1 - stage, 1};
  return {stage % workers, stage / workers};
}

int chunk_stage(ScheduleKind kind, int worker, int chunk, int workers) {
  if (v_shaped(kind)) return chunk == 0 ? worker : 2 * workers - 1 - worker;
  return chunk * workers + worker;
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  std::string known;
  for (ScheduleKind k : all_schedule_kinds()) {
    if (name == schedule_name(k)) return k;
    known += std::string(known.empty() ? "" : ", ") + schedule_name(k);
  }
  throw PlanError("unknown schedule '" + name + "' (known: " + known + ", all)");
}

void append_with_transfers(Schedule& s, int worker, const ScheduleOp& compute) {
  auto& prog = s.programs.at(static_cast<size_t>(worker));
  const int stage = compute.stage, mb = compute.microbatch;
  auto worker_of = [&](int st) {
    const auto& ws = s.stage_workers.at(static_cast<size_t>(st));
    return ws[static_cast<size_t>(mb) % ws.size()];
  };
  const bool fwd = compute.kind == OpKind::kForward;
  const bool takes_gradient =
      compute.kind == OpKind::kBackward || compute.kind == OpKind::kBackwardInput;
  if (fwd && stage > 0)
    prog.push_back({OpKind::kRecv, stage - 1, mb, Payload::kActivation, worker_of(stage - 1)});
  if (takes_gradient && stage + 1 < s.num_stages)
    prog.push_back({OpKind::kRecv, stage + 1, mb, Payload::kGradient, worker_of(stage + 1)});
  prog.push_back(compute);
  if (fwd && stage + 1 < s.num_stages)
    prog.push_back({OpKind::kSend, stage, mb, Payload::kActivation, worker_of(stage + 1)});
  if (takes_gradient && stage > 0)
    prog.push_back({OpKind::kSend, stage, mb, Payload::kGradient, worker_of(stage - 1)});
}

namespace {

// Appends ops to a schedule's programs, computes with their sends and receives
// (append_with_transfers).
struct Builder {
  Schedule& s;

  explicit Builder(Schedule& sched) : s(sched) {}
  void add(int w, OpKind kind, int stage, int mb, Payload payload = Payload::kActivation,
           int peer = -1) {
    s.programs[w].push_back(ScheduleOp{kind, stage, mb, payload, peer});
  }
  void forward(int w, int stage, int mb) {
    append_with_transfers(s, w, {OpKind::kForward, stage, mb});
  }
  void backward(int w, int stage, int mb, OpKind kind = OpKind::kBackward) {
    append_with_transfers(s, w, {kind, stage, mb});
  }
  void step(int w, int stage, int index) {
    if (s.stage_workers[stage].size() > 1) add(w, OpKind::kAllreduce, stage, index);
    add(w, OpKind::kStep, stage, index);
  }
};

// Stages with replicas, numbered contiguously.
Schedule skeleton(const std::string& name, const std::vector<int>& replicas, int microbatches,
                  std::vector<int>& base) {
  Schedule s;
  s.name = name;
  s.num_stages = static_cast<int>(replicas.size());
  s.num_microbatches = microbatches;
  int w = 0;
  for (int r : replicas) {
    base.push_back(w);
    std::vector<int> ws;
    for (int q = 0; q < r; ++q) ws.push_back(w++);
    s.stage_workers.push_back(ws);
  }
  s.programs.resize(w);
  return s;
}

// Microbatches of stage s's replica q, ascending.
std::vector<int> local_microbatches(int microbatches, int r, int q) {
  std::vector<int> out;
  for (int b = q; b < microbatches; b += r) out.push_back(b);
  return out;
}

// 1F1B warm-up on stage s: one fewer than the minibatches in flight,
// ceil(workers from s to the end / replicas of s) (p - s when unreplicated).
int warmup_count(const std::vector<int>& replicas, int stage) {
  int downstream = 0;
  for (size_t t = stage; t < replicas.size(); ++t) downstream += replicas[t];
  return (downstream + replicas[stage] - 1) / replicas[stage] - 1;
}

Schedule build_standard(ScheduleKind kind, const ScheduleShape& shape) {
  const auto& reps = shape.replicas;
  const bool two_bw = kind == ScheduleKind::kTwoBW;
  const int total = two_bw ? shape.microbatches * shape.steps : shape.microbatches;
  if (two_bw && shape.microbatches < *std::max_element(reps.begin(), reps.end()))
    throw PlanError("2bw needs at least as many microbatches per step as replicas of a stage");
  std::vector<int> base;
  Schedule s = skeleton(schedule_name(kind), reps, total, base);
  s.split_backward = kind == ScheduleKind::kZeroBubbleH1;
  if (std::count(shape.batched_weights.begin(), shape.batched_weights.end(), true) > 0) {
    if (kind != ScheduleKind::kGPipe && kind != ScheduleKind::kOneFOneB)
      throw PlanError(fmt::format("batched weight gradients run with gpipe and 1f1b, not {}",
                                  schedule_name(kind)));
    if (shape.batched_weights.size() != reps.size())
      throw PlanError(fmt::format("batched weight gradients: {} stage flags for {} stages",
                                  shape.batched_weights.size(), reps.size()));
    for (size_t st = 0; st < reps.size(); ++st)
      if (shape.batched_weights[st] && reps[st] != 1)
        throw PlanError(fmt::format(
            "batched weight gradients need unreplicated stages (stage {} has {} replicas)", st,
            reps[st]));
    s.batched_weights = shape.batched_weights;
  }
  // Batched: after a stage's last B (and its send), the step's one W.
  auto batched_w = [&](int w, int st) {
    if (s.batched(st)) s.programs[w].push_back({OpKind::kBackwardWeight, st, kWholeStep});
  };
  Builder b(s);
  const int p = s.num_stages;
  for (int st = 0; st < p; ++st)
    for (int q = 0; q < reps[st]; ++q) {
      const int w = base[st] + q;
      auto mbs = local_microbatches(total, reps[st], q);
      const int n = static_cast<int>(mbs.size());
      if (kind == ScheduleKind::kGPipe) {
        for (int mb : mbs) b.forward(w, st, mb);
        for (int mb : mbs)
          b.backward(w, st, mb, s.split(st) ? OpKind::kBackwardInput : OpKind::kBackward);
        batched_w(w, st);
        b.step(w, st, 0);
        continue;
      }
      const int warm = std::min(warmup_count(reps, st), n);
      const OpKind bkind = s.split(st) ? OpKind::kBackwardInput : OpKind::kBackward;
      // ZB-H1: the weight gradient of the j-th backward runs after the
      // (j + s)-th input gradient on stage s. Late stages, idle during the
      // warm-up, push their input gradients upstream first and do the W's
      // later; stashes then peak at s + 1 + (p - s - 1) = p on every stage,
      // the 1F1B peak of stage 0.
      const int delay = st;
      int next_w = 0, done_b = 0;
      int min_local = total / reps[st];  // replicas that all hold a round
      // Asynchronous schedules: the update of round k waits for its
      // allreduce, so it is applied after the next round's backward (two
      // gradient buffers) and the allreduce overlaps that round's compute.
      int pending = -1;
      auto async_step = [&](int round, bool sync) {
        if (sync && !shape.overlap_allreduce) {
          b.add(w, OpKind::kAllreduce, st, round);
          b.add(w, OpKind::kStep, st, round);
          return;
        }
        if (sync) b.add(w, OpKind::kAllreduce, st, round);
        if (pending >= 0) b.add(w, OpKind::kStep, st, pending);
        pending = -1;
        if (sync)
          pending = round;
        else
          b.add(w, OpKind::kStep, st, round);
      };
      auto after_backward = [&](int mb) {
        ++done_b;
        if (kind == ScheduleKind::kPipeDream) {
          int round = done_b - 1;
          async_step(round, reps[st] > 1 && round < min_local);
        } else if (two_bw) {
          int group = mb / shape.microbatches;
          int last_in_group = std::min(total, (group + 1) * shape.microbatches) - 1;
          if (mb + reps[st] > last_in_group) async_step(group, reps[st] > 1);
        } else if (s.split_backward) {
          while (next_w < n && next_w + delay < done_b)
            b.add(w, OpKind::kBackwardWeight, st, mbs[next_w++]);
        }
      };
      for (int i = 0; i < warm; ++i) b.forward(w, st, mbs[i]);
      for (int i = 0; i + warm < n; ++i) {
        b.forward(w, st, mbs[i + warm]);
        b.backward(w, st, mbs[i], bkind);
        after_backward(mbs[i]);
      }
      for (int i = std::max(0, n - warm); i < n; ++i) {
        b.backward(w, st, mbs[i], bkind);
        after_backward(mbs[i]);
      }
      if (pending >= 0) b.add(w, OpKind::kStep, st, pending);
      while (s.split_backward && next_w < n) b.add(w, OpKind::kBackwardWeight, st, mbs[next_w++]);
      batched_w(w, st);
      if (kind == ScheduleKind::kOneFOneB || kind == ScheduleKind::kZeroBubbleH1) b.step(w, st, 0);
    }
  return s;
}

// Megatron's interleaved 1F1B: worker w holds virtual stages c p + w for
// chunks c < v. Forwards walk groups of p microbatches through chunk 0, then
// chunk 1, ...; backwards walk the chunks in reverse.
Schedule build_interleaved(const ScheduleShape& shape) {
  const int p = static_cast<int>(shape.replicas.size()), v = shape.chunks, m = shape.microbatches;
  for (int r : shape.replicas)
    if (r != 1) throw PlanError("interleaved 1F1B needs unreplicated stages");
  if (v < 1) throw PlanError("interleaved 1F1B needs at least one chunk per worker");
  if (m % p != 0)
    throw PlanError(
        fmt::format("interleaved 1F1B needs microbatches ({}) divisible by the "
                    "stages ({})",
                    m, p));
  Schedule s;
  s.name = "interleaved";
  s.num_stages = p * v;
  s.num_microbatches = m;
  for (int vs = 0; vs < p * v; ++vs) s.stage_workers.push_back({vs % p});
  s.programs.resize(p);
  Builder b(s);
  const int total = m * v;
  auto chunk = [&](int k, bool forward) {
    int c = (k % (p * v)) / p;
    return forward ? c : v - 1 - c;
  };
  auto microbatch = [&](int k) { return (k / (p * v)) * p + k % p; };
  for (int w = 0; w < p; ++w) {
    int warm = std::min((p - w - 1) * 2 + (v - 1) * p, total);
    for (int k = 0; k < warm; ++k) b.forward(w, chunk(k, true) * p + w, microbatch(k));
    for (int i = 0; i + warm < total; ++i) {
      int kf = warm + i;
      b.forward(w, chunk(kf, true) * p + w, microbatch(kf));
      b.backward(w, chunk(i, false) * p + w, microbatch(i));
    }
    for (int i = std::max(0, total - warm); i < total; ++i)
      b.backward(w, chunk(i, false) * p + w, microbatch(i));
    for (int c = 0; c < v; ++c) b.add(w, OpKind::kStep, c * p + w, 0);
  }
  return s;
}

// A V's empty schedule: 2P virtual stages on P unreplicated workers (place_chunk), each
// backward split into B and W.
Schedule v_skeleton(ScheduleKind kind, const ScheduleShape& shape) {
  const int p = static_cast<int>(shape.replicas.size());
  for (int r : shape.replicas)
    if (r != 1) throw PlanError(std::string(schedule_name(kind)) + " needs unreplicated stages");
  Schedule s;
  s.name = schedule_name(kind);
  s.num_stages = 2 * p;
  s.num_microbatches = shape.microbatches;
  s.split_backward = true;
  for (int vs = 0; vs < 2 * p; ++vs) s.stage_workers.push_back({place_chunk(kind, vs, p).worker});
  s.programs.resize(static_cast<size_t>(p));
  return s;
}

// ZB-V (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 6): worker w
// holds chunk 0 = stage w and chunk 1 = stage 2P - 1 - w. Warm-up: 2(P - w) - 1 chunk-0
// forwards, then w pairs of forwards (chunk 1, chunk 0), then P - w chunk-1 triples
// F B W; steady state F0 B0 W0 F1 B1 W1; cool-down: w pairs of input gradients
// (B0, B1), P - w pairs B0 W0, then the weight gradients left. Each worker stashes at
// most 2P chunk activations, one 1F1B stage's worth on worker 0. The pattern needs
// 2P - 1 microbatches to fill; with fewer, the missing microbatches' ops are left out.
Schedule build_zero_bubble_v(const ScheduleShape& shape) {
  const int p = static_cast<int>(shape.replicas.size()), m = shape.microbatches;
  Schedule s = v_skeleton(ScheduleKind::kZeroBubbleV, shape);
  Builder b(s);
  const int filled = std::max(m, 2 * p - 1);
  for (int w = 0; w < p; ++w) {
    const int down = w, up = 2 * p - 1 - w;
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    std::deque<int> owed0, owed1;  // microbatches whose W is owed, per chunk, oldest first
    auto f = [&](int stage, int& next) {
      if (next < m) b.forward(w, stage, next);
      ++next;
    };
    auto bi = [&](int stage, int& next, std::deque<int>& owed) {
      if (next < m) b.backward(w, stage, next, OpKind::kBackwardInput);
      owed.push_back(next++);
    };
    auto wg = [&](int stage, std::deque<int>& owed) {
      if (owed.front() < m) b.add(w, OpKind::kBackwardWeight, stage, owed.front());
      owed.pop_front();
    };
    for (int i = 0; i < 2 * (p - w) - 1; ++i) f(down, f0);
    for (int i = 0; i < w; ++i) f(up, f1), f(down, f0);
    for (int i = 0; i < p - w; ++i) f(up, f1), bi(up, b1, owed1), wg(up, owed1);
    while (f1 < f0 || f0 < filled) {
      if (f0 < filled) f(down, f0);
      bi(down, b0, owed0), wg(down, owed0);
      f(up, f1), bi(up, b1, owed1), wg(up, owed1);
    }
    for (int i = 0; i < w; ++i) bi(down, b0, owed0), bi(up, b1, owed1);
    for (int i = 0; i < p - w; ++i) bi(down, b0, owed0), wg(down, owed0);
    while (!owed1.empty()) wg(up, owed1);
    while (!owed0.empty()) wg(down, owed0);
    b.add(w, OpKind::kStep, down, 0);
    b.add(w, OpKind::kStep, up, 0);
  }
  return s;
}

// DualPipeV (DeepSeek-V3's DualPipe cut in half; the order of deepseek-ai/DualPipe's
// dualpipev.py): ZB-V's placement, filled from both ends of the V at once. Per worker w,
// in eight phases: 2(P - w - 1) chunk-0 forwards; w + 1 pairs F0 F1; P - w - 1 chunk-1
// triples B1 W F1 (W deferred from that B); the steady state F0 B1 F1 B0 (full backwards,
// a forward beside a backward of another microbatch: DualPipe overlaps their compute
// with each other's communication); P - w - 1 rounds B1 F1 B0; w + 1 pairs B1 B0 whose
// second half defers W; P - w - 1 pairs W B0 (deferred); the W's left. Deferred W's run
// oldest first. A full backward is B then its W at once. The pattern fills with 2P
// microbatches; with fewer, the missing ones' ops are left out as in ZB-V.
Schedule build_dualpipe_v(const ScheduleShape& shape) {
  const int p = static_cast<int>(shape.replicas.size()), m = shape.microbatches;
  Schedule s = v_skeleton(ScheduleKind::kDualPipeV, shape);
  Builder b(s);
  const int filled = std::max(m, 2 * p);
  for (int w = 0; w < p; ++w) {
    const int stage[2] = {w, 2 * p - 1 - w};
    int next_f[2] = {0, 0}, next_b[2] = {0, 0};
    std::deque<std::pair<int, int>> owed;  // deferred W's (stage, microbatch), oldest first
    auto f = [&](int c) {
      if (const int mb = next_f[c]++; mb < m) b.forward(w, stage[c], mb);
    };
    auto bk = [&](int c, bool defer) {
      const int mb = next_b[c]++;
      if (mb < m) {
        b.backward(w, stage[c], mb, OpKind::kBackwardInput);
        if (!defer) b.add(w, OpKind::kBackwardWeight, stage[c], mb);
      }
      if (defer) owed.emplace_back(stage[c], mb);
    };
    auto wg = [&] {
      const auto [st, mb] = owed.front();
      owed.pop_front();
      if (mb < m) b.add(w, OpKind::kBackwardWeight, st, mb);
    };
    const int rest = p - w - 1;  // workers after this one
    for (int i = 0; i < 2 * rest; ++i) f(0);
    for (int i = 0; i < w + 1; ++i) f(0), f(1);
    for (int i = 0; i < rest; ++i) bk(1, true), wg(), f(1);
    for (int i = 0; i < filled - 2 * p + w + 1; ++i) f(0), bk(1, false), f(1), bk(0, false);
    for (int i = 0; i < rest; ++i) bk(1, false), f(1), bk(0, false);
    bool defer = false;
    for (int i = 0; i < w + 1; ++i) {
      if (i == (w + 1) / 2 && w % 2 == 1) defer = true;
      bk(1, defer);
      if (i == (w + 1) / 2 && w % 2 == 0) defer = true;
      bk(0, defer);
    }
    for (int i = 0; i < rest; ++i) wg(), bk(0, true);
    while (!owed.empty()) wg();
    b.add(w, OpKind::kStep, stage[0], 0);
    b.add(w, OpKind::kStep, stage[1], 0);
  }
  return s;
}

// ZB-H2 (Qi et al., "Zero Bubble Pipeline Parallelism", section 3): ZB-H1's straight
// pipeline with up to 2P - 1 microbatches stashed per stage, as many forwards as fit
// before the first input gradient comes back. List scheduling (list_schedule.h) on unit
// F, B and W under that stash bound gives the paper's parallelogram: every stage computes
// without a gap from its first forward to its last W. Within one flushed step only the
// stagger of the stages' starts is left, (P - 1) F against ZB-H1's (P - 1)(F + B - W):
// the same with F = B = W, less where B outweighs W. The paper's remaining gain, the next
// step's forwards starting in that stagger, needs its optimizer post-validation.
Schedule build_zero_bubble_h2(const ScheduleShape& shape) {
  const int p = static_cast<int>(shape.replicas.size()), m = shape.microbatches;
  for (int r : shape.replicas)
    if (r != 1) throw PlanError("zb-h2 needs unreplicated stages");
  std::vector<int> placement;
  OpDurations unit;
  for (int st = 0; st < p; ++st) {
    placement.push_back(st);
    for (OpKind k : {OpKind::kForward, OpKind::kBackwardInput, OpKind::kBackwardWeight})
      unit[{st, k}] = 1.0;
  }
  ListScheduleLimits limits;
  limits.stash = 2 * p - 1;
  const auto actions = list_schedule(placement, p, m, limits, unit);
  if (!actions) throw PlanError(fmt::format("zb-h2 found no order for {} workers", p));
  return complete_schedule(schedule_name(ScheduleKind::kZeroBubbleH2), placement, m, *actions,
                           "zb-h2");
}

// V-Half ("Pipeline Parallelism with Controllable Memory", Qi et al., 2024): ZB-V's V
// at about half its activation memory. List scheduling (list_schedule.h) on unit F, B
// and W with at most P / 2 + 1 microbatches in the pipeline at once, each holding at
// most two chunks on a worker: a worker stashes at most P + 2 chunks against ZB-V's 2P
// (half, as P grows), while its steady state stays busy.
Schedule build_v_half(const ScheduleShape& shape) {
  const int p = static_cast<int>(shape.replicas.size()), m = shape.microbatches;
  for (int r : shape.replicas)
    if (r != 1) throw PlanError("v-half needs unreplicated stages");
  std::vector<int> placement;
  OpDurations unit;
  for (int vs = 0; vs < 2 * p; ++vs) {
    placement.push_back(place_chunk(ScheduleKind::kVHalf, vs, p).worker);
    for (OpKind k : {OpKind::kForward, OpKind::kBackwardInput, OpKind::kBackwardWeight})
      unit[{vs, k}] = 1.0;
  }
  ListScheduleLimits limits;
  limits.window = p / 2 + 1;
  limits.stash = 2 * limits.window;  // W's before new F's once a worker holds that many
  const auto actions = list_schedule(placement, p, m, limits, unit);
  if (!actions) throw PlanError(fmt::format("v-half found no order for {} workers", p));
  return complete_schedule(schedule_name(ScheduleKind::kVHalf), placement, m, *actions, "v-half");
}

}  // namespace

Schedule build_schedule(ScheduleKind kind, const ScheduleShape& shape) {
  if (shape.replicas.empty()) throw PlanError("a schedule needs at least one stage");
  for (int r : shape.replicas)
    if (r < 1) throw PlanError("every stage needs at least one replica");
  if (shape.microbatches < 1) throw PlanError("a schedule needs at least one microbatch");
  if (kind == ScheduleKind::kInterleaved) return build_interleaved(shape);
  if (kind == ScheduleKind::kZeroBubbleV) return build_zero_bubble_v(shape);
  if (kind == ScheduleKind::kDualPipeV) return build_dualpipe_v(shape);
  if (kind == ScheduleKind::kVHalf) return build_v_half(shape);
  if (kind == ScheduleKind::kZeroBubbleH2) return build_zero_bubble_h2(shape);
  if (kind == ScheduleKind::kFromFile)
    throw PlanError("a schedule from a file is loaded (load_schedule_file), not built");
  return build_standard(kind, shape);
}

}  // namespace pipetrain::partitioner
