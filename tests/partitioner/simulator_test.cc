// The simulator's closed forms: bubbles, activations in flight per stage,
// weight versions; schedule validation; timelines.
#include "partitioner/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "ir/error.h"
#include "partitioner/cost_model.h"
#include "partitioner/dp.h"

namespace pipetrain::partitioner {
namespace {

// p uniform stages, one layer each, forward F and backward 2F per minibatch,
// nothing crossing the cuts (transfers take no time).
struct Uniform {
  Profile profile;
  Plan plan;
  Uniform(int p, double forward, std::vector<int> reps = {}) {
    if (reps.empty()) reps.assign(p, 1);
    for (int s = 0; s < p; ++s)
      profile.layers.push_back(
          {std::string(1, char('a' + s)), forward, 2 * forward, 100, 0, 10, {}});
    Topology t;
    int workers = 0;
    for (int r : reps) workers += r;
    t.levels = {{workers, 1e9}};
    std::vector<int> last;
    for (int s = 0; s < p; ++s) last.push_back(s);
    plan = evaluate_plan(profile, t, last, reps, "test");
  }
};

// Two one-layer stages on one worker each, `cut_bytes` crossing between
// them over a 1e9 B/s link, each layer taking `forward` and `backward` s.
std::pair<Profile, Plan> two_stages_across_a_cut(double forward, double backward,
                                                 int64_t cut_bytes) {
  Profile prof;
  prof.layers = {{"a", forward, backward, 0, cut_bytes, 0, {}, 0},
                 {"b", forward, backward, 0, 0, 0, {}, 0}};
  Topology t;
  t.levels = {{2, 1e9}};
  Plan plan = evaluate_plan(prof, t, {0, 1}, {1, 1}, "test");
  return {prof, plan};
}

TEST(Simulator, FlushBubbleIsTheClosedForm) {
  for (int p : {2, 4}) {
    for (int m : {1, 4, 8}) {
      // F = m, B = 2m per minibatch: 1 and 2 per microbatch, exact in binary.
      Uniform u(p, double(m));
      for (ScheduleKind k : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB}) {
        SimOptions o;
        o.microbatches = m;
        SimResult r = simulate(u.plan, u.profile, k, o);
        double want = double(p - 1) / double(m + p - 1);
        EXPECT_DOUBLE_EQ(r.bubble_fraction, want) << schedule_name(k) << " p=" << p << " m=" << m;
        EXPECT_DOUBLE_EQ(r.makespan_s, 3.0 * (m + p - 1));
      }
    }
  }
}

TEST(Simulator, ActivationsInFlightPerStage) {
  const int p = 4, m = 8;
  Uniform u(p, double(m));
  SimOptions o;
  o.microbatches = m;
  SimResult gpipe = simulate(u.plan, u.profile, ScheduleKind::kGPipe, o);
  SimResult flush = simulate(u.plan, u.profile, ScheduleKind::kOneFOneB, o);
  SimResult async = simulate(u.plan, u.profile, ScheduleKind::kPipeDream, o);
  SimResult two_bw = simulate(u.plan, u.profile, ScheduleKind::kTwoBW, o);
  for (int s = 0; s < p; ++s) {
    EXPECT_EQ(gpipe.stages[s].peak_in_flight, m);
    EXPECT_EQ(flush.stages[s].peak_in_flight, p - s);
    EXPECT_EQ(async.stages[s].peak_in_flight, p - s);
    EXPECT_EQ(gpipe.stages[s].weight_versions, 1);
    EXPECT_EQ(flush.stages[s].weight_versions, 1);
    // Weight stashing: stage s keeps p - s versions.
    EXPECT_EQ(async.stages[s].weight_versions, p - s) << "stage " << s;
    // 2BW: the stashed version and the newest one, never more.
    EXPECT_LE(two_bw.stages[s].weight_versions, 2);
  }
  EXPECT_EQ(two_bw.stages[0].weight_versions, 2);
  // Few microbatches: 1F1B holds min(p - s, m).
  o.microbatches = 2;
  SimResult short_run = simulate(u.plan, u.profile, ScheduleKind::kOneFOneB, o);
  EXPECT_EQ(short_run.stages[0].peak_in_flight, 2);
  EXPECT_EQ(short_run.stages[3].peak_in_flight, 1);
}

TEST(Simulator, PipeDreamSteadyStateRunsAtTheSlowestStage) {
  // Straight: one minibatch leaves every F + B = 3 s once the pipe is full.
  Uniform u(4, 1.0);
  SimOptions o;
  o.microbatches = 24;
  EXPECT_NEAR(simulate(u.plan, u.profile, ScheduleKind::kPipeDream, o).time_per_minibatch_s, 3.0,
              1e-9);
  // Stage 1 replicated twice and twice as slow: each replica takes every
  // other minibatch. The replicas' allreduce runs beside compute and no
  // longer holds them in lockstep, so the pipe runs at the cost model's 3 s.
  Profile prof;
  prof.layers = {{"a", 1, 2, 0, 0, 0, {}, 0}, {"b", 2, 4, 0, 0, 0, {}, 0}};
  Topology t;
  t.levels = {{3, 1e9}};
  Plan plan = evaluate_plan(prof, t, {0, 1}, {1, 2}, "test");
  EXPECT_DOUBLE_EQ(plan.time_per_minibatch_s, 3.0);
  SimResult r = simulate(plan, prof, ScheduleKind::kPipeDream, o);
  EXPECT_NEAR(r.time_per_minibatch_s, 3.0, 1e-9);
  validate(r.schedule_ops);
}

TEST(Simulator, ReplicatedStagesMatchTheCostModel) {
  // Uniform stages of F = 1, B = 2 per minibatch, each replicated r times,
  // weights of P bytes per stage on a 1e9 B/s level: the allreduce takes
  // AR = 4 (r-1) P / (1e9 r) and runs on the collective stream beside the
  // next round's compute, so one round of r minibatches takes max(3, AR),
  // the cost model's max(C, AR) / r per minibatch.
  struct Case {
    int stages, r;
    double param_bytes;
  };
  for (Case c : {Case{1, 4, 2e9}, Case{1, 4, 0.5e9}, Case{1, 8, 1e9}, Case{2, 2, 2e9},
                 Case{2, 2, 1e9}, Case{3, 2, 0.5e9}}) {
    Profile prof;
    std::vector<int> last, reps;
    for (int s = 0; s < c.stages; ++s) {
      prof.layers.push_back(
          {std::string(1, char('a' + s)), 1.0, 2.0, 0, 0, static_cast<int64_t>(c.param_bytes), {}});
      last.push_back(s);
      reps.push_back(c.r);
    }
    Topology t;
    t.levels = {{c.stages * c.r, 1e9}};
    Plan plan = evaluate_plan(prof, t, last, reps, "test");
    double ar = 4.0 * (c.r - 1) * c.param_bytes / (1e9 * c.r);
    EXPECT_DOUBLE_EQ(plan.time_per_minibatch_s, std::max(3.0, ar) / c.r);
    SimResult r = simulate(plan, prof, ScheduleKind::kPipeDream);
    EXPECT_NEAR(r.time_per_minibatch_s, plan.time_per_minibatch_s, 0.01 * plan.time_per_minibatch_s)
        << c.stages << " stages x " << c.r << ", AR " << ar;
    validate(r.schedule_ops);
  }
}

TEST(Simulator, RoundTripsBoundThePipeline) {
  // Two stages of F = 1, B = 2 on one worker each, a 2 GB cut at 1 GB/s:
  // each minibatch crosses it twice, 4 s, so stage 0's two minibatches in
  // flight come back every (6 + 4) s: 5 s per minibatch, more than the
  // stages' 3 s and the cut's 4 s (2 GB each way over one link).
  const auto [prof, plan] = two_stages_across_a_cut(1, 2, 2'000'000'000);
  EXPECT_DOUBLE_EQ(plan.stages[0].round_trip_s, 5.0);
  EXPECT_DOUBLE_EQ(plan.stages[1].round_trip_s, 3.0);
  EXPECT_DOUBLE_EQ(plan.time_per_minibatch_s, 5.0);
  SimOptions o;
  o.microbatches = 24;
  EXPECT_NEAR(simulate(plan, prof, ScheduleKind::kPipeDream, o).time_per_minibatch_s, 5.0, 1e-9);
}

// GNMT's shape (zoo compare, 4x4 at 10/150 GB/s): a large cut between
// servers decides the plan; the DP chooses with round trips, and the
// simulator's asynchronous 1F1B then runs at its prediction.
TEST(Simulator, ThePlanChosenWithRoundTripsRunsAsPredicted) {
  Profile prof;
  for (int l = 0; l < 12; ++l)
    prof.layers.push_back({std::string(1, char('a' + l)),
                           1e-3,
                           2e-3,
                           1'000'000,
                           l % 4 == 3 ? 60'000'000 : 6'000'000,
                           20'000'000,
                           {},
                           0});
  Topology t;
  t.levels = {{2, 10e9}, {4, 150e9}};
  Plan plan = partition(prof, t);
  const double sim = simulate(plan, prof, ScheduleKind::kPipeDream).time_per_minibatch_s;
  EXPECT_NEAR(sim, plan.time_per_minibatch_s, 0.05 * plan.time_per_minibatch_s) << plan.config();
  // The round trip decides stage 0 (the cut at 10 GB/s both ways).
  ASSERT_GE(plan.stages.size(), 2u);
  EXPECT_DOUBLE_EQ(plan.stages[0].time_s, plan.stages[0].round_trip_s);
  EXPECT_GT(plan.stages[0].round_trip_s, plan.stages[0].compute_s);
}

// cost_model.h's lockstep wait with GNMT's plan 7-9 on 2x8 at 25/150 GB/s
// (zoo compare): stage 1's nine replicas allreduce 69.0 ms of gradients a
// round at 9.043 ms a minibatch, so they bunch into 12.4 ms while stage 0's
// seven (14.3 ms a round at 8.815) send a round's nine over 65 ms: 26 ms
// of waiting per minibatch; stage 0 does not wait on stage 1's gradients.
// Equal replicas on equal stages (ReplicatedStagesMatchTheCostModel's 2 x 2)
// bunch alike and wait nothing; unreplicated stages never wait.
TEST(Simulator, LockstepReplicasWaitForTheirRoundToGather) {
  const RoundShape stage0 = round_shape(14.3e-3 / 7, 7, 8.815e-3);
  const RoundShape stage1 = round_shape(69.0e-3 / 9, 9, 9.043e-3);
  EXPECT_NEAR(stage1.stagger_s, 9 * 9.043e-3 - 69.0e-3, 1e-12);
  EXPECT_NEAR(stage0.stagger_s, 7 * 8.815e-3 - 14.3e-3, 1e-12);
  const double spread = 8 * 8.815e-3 - 6 * (8.815e-3 - stage0.stagger_s / 6);
  EXPECT_NEAR(lockstep_wait(stage1, stage0), (spread - stage1.stagger_s) / 2, 1e-12);
  EXPECT_NEAR(lockstep_wait(stage1, stage0), 26.3e-3, 0.1e-3);
  EXPECT_EQ(lockstep_wait(stage0, stage1), 0.0);
  const RoundShape even = round_shape(2.0 / 2, 2, 1.5);  // AR 2 s a round at 1.5 s
  EXPECT_EQ(lockstep_waits(even, even), 0.0);
  const RoundShape alone = round_shape(0, 1, 1.0);
  EXPECT_EQ(lockstep_waits(alone, alone), 0.0);
  EXPECT_EQ(lockstep_wait(alone, stage1), 0.0);
}

TEST(Simulator, TiedStagesMeetAtTheirSteps) {
  // Two uniform stages (F 1 s, B 2 s) sharing a parameter of 1e9 bytes over
  // 1e9 B/s links: the two-copy allreduce takes 1 s before each update.
  Uniform u(2, 1.0);
  u.profile.tied = {{"wte", int64_t{1'000'000'000}, {0, 1}}};
  Topology t;
  t.levels = {{2, 1e9}};
  const Plan plan = evaluate_plan(u.profile, t, {0, 1}, {1, 1}, "test");
  EXPECT_DOUBLE_EQ(plan.stages[0].tied_s, 1.0);
  EXPECT_DOUBLE_EQ(plan.time_per_minibatch_s, 4.0);  // compute 3 s + the tied allreduce
  // Whole on one stage, nothing is tied to another stage.
  EXPECT_DOUBLE_EQ(evaluate_plan(u.profile, t, {1}, {1}, "test").stages[0].tied_s, 0.0);

  SimOptions o;
  o.microbatches = 24;
  // Async 1F1B: the copies exchange delayed partials (delayed_ties.h). The
  // last stage's update k takes stage 0's partial of update k - 1, which
  // arrived 1 s after stage 0's update k - 1 began; nothing waits, and a
  // minibatch takes its 3 s of compute as without the tie. Meeting at every
  // update instead took B0 + F1 + B1 + the allreduce = 6 s.
  SimResult async = simulate(plan, u.profile, ScheduleKind::kPipeDream, o);
  EXPECT_EQ(async.schedule_ops.tied_groups, (std::vector<std::vector<int>>{{0, 1}}));
  EXPECT_TRUE(async.schedule_ops.tied_delayed);
  EXPECT_NEAR(async.time_per_minibatch_s, 3.0, 1e-9);
  std::map<std::pair<int, int>, double> step_start;  // (step, stage) -> start
  for (const auto& op : async.run.ops)
    if (op.op.kind == OpKind::kStep) step_start[{op.op.microbatch, op.op.stage}] = op.start;
  ASSERT_EQ(step_start.size(), 48u);
  for (int k = 1; k < 23; ++k)
    EXPECT_GE(step_start.at({k, 1}), step_start.at({k - 1, 0}) + 1.0) << "step " << k;
  // The round's last update takes every partial left: stage 1 waits for
  // stage 0's last one.
  EXPECT_DOUBLE_EQ(step_start.at({23, 1}), step_start.at({23, 0}) + 1.0);
  // 1F1B with flushes: one meeting per step, at the end: the makespan grows by 1 s.
  o.microbatches = 4;
  SimResult flush = simulate(plan, u.profile, ScheduleKind::kOneFOneB, o);
  Uniform untied(2, 1.0);
  const Plan untied_plan = evaluate_plan(untied.profile, t, {0, 1}, {1, 1}, "test");
  EXPECT_NEAR(flush.makespan_s,
              simulate(untied_plan, untied.profile, ScheduleKind::kOneFOneB, o).makespan_s + 1.0,
              1e-9);
  validate(async.schedule_ops);
}

TEST(Simulator, SyncedUpdatesMeetAcrossAllStages) {
  // Pipeline-wide gradient clipping: every stage's update waits for all.
  Uniform u(3, 1.0);
  SimOptions o;
  o.microbatches = 12;
  o.synced_updates = true;
  SimResult r = simulate(u.plan, u.profile, ScheduleKind::kPipeDream, o);
  EXPECT_EQ(r.schedule_ops.tied_groups, (std::vector<std::vector<int>>{{0, 1, 2}}));
  std::map<int, std::vector<double>> starts;
  for (const auto& op : r.run.ops)
    if (op.op.kind == OpKind::kStep) starts[op.op.microbatch].push_back(op.start);
  for (const auto& [k, s] : starts) {
    ASSERT_EQ(s.size(), 3u) << "step " << k;
    EXPECT_DOUBLE_EQ(s[0], s[2]) << "step " << k;
  }
  o.synced_updates = false;
  EXPECT_GT(r.time_per_minibatch_s,
            simulate(u.plan, u.profile, ScheduleKind::kPipeDream, o).time_per_minibatch_s + 0.5);
}

TEST(Simulator, FlushAllreduceOncePerStep) {
  // Data parallel on 4 workers, C = 3 per minibatch, AR = 6: a flush
  // schedule computes its m microbatches (one minibatch per replica), then
  // allreduces once: (3 + 6) / 4 per minibatch.
  Profile prof;
  prof.layers = {{"a", 1.0, 2.0, 0, 0, 2'000'000'000, {}, 0}};
  Topology t;
  t.levels = {{4, 1e9}};
  Plan plan = evaluate_plan(prof, t, {0}, {4}, "test");
  SimOptions o;
  o.microbatches = 4;
  for (ScheduleKind k : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB})
    EXPECT_DOUBLE_EQ(simulate(plan, prof, k, o).time_per_minibatch_s, 9.0 / 4);
}

TEST(Simulator, InterleavedAndZeroBubbleShrinkTheBubble) {
  const int p = 4, m = 8;
  Uniform u(p, double(m));
  SimOptions o;
  o.microbatches = m;
  double one_f_one_b = simulate(u.plan, u.profile, ScheduleKind::kOneFOneB, o).bubble_fraction;
  o.chunks = 2;
  SimResult inter = simulate(u.plan, u.profile, ScheduleKind::kInterleaved, o);
  // Megatron's closed form: (p - 1) / (v m + p - 1).
  EXPECT_NEAR(inter.bubble_fraction, 3.0 / (2 * 8 + 3), 1e-12);
  SimResult zb = simulate(u.plan, u.profile, ScheduleKind::kZeroBubbleH1, o);
  EXPECT_LT(zb.bubble_fraction, one_f_one_b);
  // ZB-H1's closed form with F = B = W = 1: m (F + B + W) + (p - 1)(F + B - W),
  // against 1F1B's (m + p - 1)(F + B + W); stashes peak at p on every stage.
  EXPECT_DOUBLE_EQ(zb.makespan_s, 8 * 3 + 3 * 1);
  for (int s = 0; s < p; ++s) EXPECT_EQ(zb.stages[s].peak_in_flight, p);
  for (const auto& s : {inter.schedule_ops, zb.schedule_ops}) validate(s);
}

// ZB-H2 on p workers, F = B = W = 1: the parallelogram. Every worker computes its 3m
// without a gap from its first forward, so the step is 3m + p - 1, the stagger of the
// starts; stage 0 stashes 2p - 1 microbatches. With B = 1.5 W ZB-H1 also waits
// (p - 1)(F + B - W) in its tail, ZB-H2 only the stagger (p - 1) F.
TEST(Simulator, ZeroBubbleH2LeavesOnlyTheStaggerOfTheStarts) {
  for (int p : {2, 4, 8})
    for (int m : {2 * p, 4 * p}) {
      const std::string what = "p = " + std::to_string(p) + ", m = " + std::to_string(m);
      Uniform u(p, double(m));
      SimOptions o;
      o.microbatches = m;
      const SimResult h2 = simulate(u.plan, u.profile, ScheduleKind::kZeroBubbleH2, o);
      validate(h2.schedule_ops);
      EXPECT_DOUBLE_EQ(h2.makespan_s, 3.0 * m + (p - 1)) << what;
      std::vector<double> first(p, 1e300), last(p, 0), busy(p, 0);
      for (const auto& t : h2.run.ops) {
        if (t.op.kind == OpKind::kStep || t.op.kind == OpKind::kAllreduce) continue;
        first[t.worker] = std::min(first[t.worker], t.start);
        last[t.worker] = std::max(last[t.worker], t.end);
        busy[t.worker] += t.end - t.start;
      }
      for (int w = 0; w < p; ++w) {
        EXPECT_DOUBLE_EQ(first[w], w) << what;
        EXPECT_DOUBLE_EQ(last[w] - first[w], busy[w]) << what << ", worker " << w;
        EXPECT_LE(h2.stages[w].peak_in_flight, 2 * p - 1) << what;
      }
      EXPECT_EQ(h2.stages[0].peak_in_flight, 2 * p - 1) << what;
      // B = 1.2, W = 0.8 per microbatch: ZB-H1 waits (p - 1)(F + B - W) = 1.4 (p - 1) in
      // its tail. ZB-H2's order, made for F = B = W, stays below 1F1B-flush, and below
      // ZB-H1 where the warm-up weighs most (m = 2p, p >= 4: p = 8, 55 against 57.8).
      Uniform heavy(p, double(m));
      for (auto& l : heavy.profile.layers) l.backward_input_s = 1.2 * m;
      const double zb1 =
          simulate(heavy.plan, heavy.profile, ScheduleKind::kZeroBubbleH1, o).makespan_s;
      const double zb2 =
          simulate(heavy.plan, heavy.profile, ScheduleKind::kZeroBubbleH2, o).makespan_s;
      EXPECT_NEAR(zb1, 3.0 * m + (p - 1) * (1 + 1.2 - 0.8), 1e-9) << what;
      EXPECT_LT(zb2, simulate(heavy.plan, heavy.profile, ScheduleKind::kOneFOneB, o).makespan_s)
          << what;
      if (m == 2 * p && p >= 4) {
        EXPECT_LT(zb2, zb1) << what;
      }
    }
}

// ZB-V on p workers of two chunks each, F = B = W per chunk: the V keeps 1F1B's
// memory (at most 2p chunk activations, p stages' worth, per worker) and its
// bubble is far below ZB-H1's, within one chunk forward per worker of warm-up.
TEST(Simulator, ZeroBubbleVFillsThePipelineWithinOneFOneBMemory) {
  for (int p : {2, 4})
    for (int m : {2 * p, 4 * p}) {
      const std::string what = "p = " + std::to_string(p) + ", m = " + std::to_string(m);
      // Per microbatch and stage: F 1, B 1, W 1 (backward 2, split evenly); per chunk half.
      Uniform u(p, double(m));
      SimOptions o;
      o.microbatches = m;
      const SimResult v = simulate(u.plan, u.profile, ScheduleKind::kZeroBubbleV, o);
      validate(v.schedule_ops);
      const SimResult h1 = simulate(u.plan, u.profile, ScheduleKind::kZeroBubbleH1, o);
      // Every worker computes 3m; ZB-H1 idles (p - 1)(F + B - W) = p - 1 besides.
      EXPECT_DOUBLE_EQ(h1.makespan_s, 3.0 * m + (p - 1)) << what;
      EXPECT_LT(v.makespan_s, h1.makespan_s) << what;
      // The paper's ZB-V bubble with F = B = W is (p - 1)(F + B - 2W) = 0 past the
      // warm-up, in which the last worker waits for the first microbatch to cross
      // p - 1 chunk forwards (0.5 each): that wait is all the idle time left.
      EXPECT_DOUBLE_EQ(v.makespan_s, 3.0 * m + 0.5 * (p - 1)) << what;
      for (int w = 0; w < p; ++w) EXPECT_LE(v.stages[w].peak_in_flight, 2 * p) << what;
      EXPECT_EQ(v.stages[0].peak_in_flight, 2 * p) << what;
    }
}

// DualPipeV on p workers of two chunks each, F = B = W per chunk (0.5): DualPipe's
// bubble, (PP / 2 - 1)(F&B + B - 3W) for PP = 2p ranks (DualPipeV is DualPipe cut in
// half), with B the full backward (B + W here, 1) and F&B a forward beside a backward
// (F + B + W, 1.5: one core overlaps nothing), is (p - 1)(1.5 + 1 - 1.5) = p - 1.
// The simulator finds half of that: ZB-V's warm-up wait and nothing else, at one chunk
// activation more than ZB-V on each worker.
TEST(Simulator, DualPipeVStaysWithinItsPaperBubble) {
  for (int p : {2, 3, 4})
    for (int m : {2 * p, 4 * p}) {
      const std::string what = "p = " + std::to_string(p) + ", m = " + std::to_string(m);
      Uniform u(p, double(m));
      SimOptions o;
      o.microbatches = m;
      const SimResult d = simulate(u.plan, u.profile, ScheduleKind::kDualPipeV, o);
      validate(d.schedule_ops);
      EXPECT_LE(d.makespan_s, 3.0 * m + (p - 1)) << what;
      EXPECT_DOUBLE_EQ(d.makespan_s, 3.0 * m + 0.5 * (p - 1)) << what;
      for (int w = 0; w < p; ++w) EXPECT_EQ(d.stages[w].peak_in_flight, 2 * p + 1) << what;
    }
}

// V-Half on p workers, F = B = W per chunk (0.5): at most p / 2 + 1 microbatches in
// the V, so each worker stashes at most 2 (p / 2 + 1) chunks, against ZB-V's 2p and
// 1F1B-flush's p stages (2p chunks) on its first worker; its step stays below
// 1F1B-flush's (p = 8, m = 32: 113.5 against 117, ZB-V 99.5, at 10 chunks against 16).
TEST(Simulator, VHalfHoldsHalfOfZeroBubbleVsActivations) {
  for (int p : {2, 3, 4, 8})
    for (int m : {2 * p, 4 * p}) {
      const std::string what = "p = " + std::to_string(p) + ", m = " + std::to_string(m);
      Uniform u(p, double(m));
      SimOptions o;
      o.microbatches = m;
      const SimResult h = simulate(u.plan, u.profile, ScheduleKind::kVHalf, o);
      validate(h.schedule_ops);
      const SimResult v = simulate(u.plan, u.profile, ScheduleKind::kZeroBubbleV, o);
      const SimResult f = simulate(u.plan, u.profile, ScheduleKind::kOneFOneB, o);
      int peak = 0;
      for (int w = 0; w < p; ++w) peak = std::max(peak, h.stages[w].peak_in_flight);
      EXPECT_LE(peak, 2 * (p / 2 + 1)) << what;
      if (p >= 4) {
        EXPECT_LT(peak, 2 * p) << what;
      }
      EXPECT_LT(h.makespan_s, f.makespan_s) << what;
      EXPECT_GE(h.makespan_s, v.makespan_s) << what;
    }
}

// ZB-H1 charges B the measured input-gradient part of the backward and W
// the rest with the gradient accumulation; the first stage, which sends no
// gradient upstream, has no B work at all. Unmeasured: half and half.
TEST(Simulator, ZeroBubbleChargesTheMeasuredInputGradientPart) {
  auto [prof, plan] = two_stages_across_a_cut(1.0, 4.0, 0);
  for (auto& l : prof.layers) l.accumulate_s = 0.5;
  SimOptions o;
  o.microbatches = 2;
  auto durations = [&, plan = plan](const Profile& pr) {  // clang 14 captures no bindings
    std::map<std::pair<int, OpKind>, double> d;           // (stage, kind) -> one op's time
    for (const auto& t : simulate(plan, pr, ScheduleKind::kZeroBubbleH1, o).run.ops)
      d[{t.op.stage, t.op.kind}] = t.end - t.start;
    return d;
  };
  auto half = durations(prof);
  EXPECT_DOUBLE_EQ((half[{1, OpKind::kBackwardInput}]), 1.0);  // 4 s / 2 microbatches / 2
  EXPECT_DOUBLE_EQ((half[{1, OpKind::kBackwardWeight}]), 1.0 + 0.25);
  prof.layers[0].backward_input_s = 1.0;  // stage 0's: no gradient leaves it
  prof.layers[1].backward_input_s = 3.0;
  auto measured = durations(prof);
  EXPECT_DOUBLE_EQ((measured[{0, OpKind::kBackwardInput}]), 0.0);
  EXPECT_DOUBLE_EQ((measured[{0, OpKind::kBackwardWeight}]), 2.0 + 0.25);
  EXPECT_DOUBLE_EQ((measured[{1, OpKind::kBackwardInput}]), 1.5);
  EXPECT_DOUBLE_EQ((measured[{1, OpKind::kBackwardWeight}]), 0.5 + 0.25);
  // What B makes for W is held from B to W, on top of the stashes (none
  // here): 1,000 bytes per minibatch, 500 per microbatch, times the most
  // microbatches between their B and W at once on stage 1.
  EXPECT_DOUBLE_EQ(
      simulate(plan, prof, ScheduleKind::kZeroBubbleH1, o).stages[1].peak_activation_bytes, 0);
  prof.layers[1].carry_bytes = 1000;
  const SimResult r = simulate(plan, prof, ScheduleKind::kZeroBubbleH1, o);
  int between = 0, most = 0;
  for (const auto& t : r.run.ops)
    if (t.op.stage == 1 && t.op.kind == OpKind::kBackwardInput)
      most = std::max(most, ++between);
    else if (t.op.stage == 1 && t.op.kind == OpKind::kBackwardWeight)
      --between;
  EXPECT_GE(most, 1);
  EXPECT_DOUBLE_EQ(r.stages[1].peak_activation_bytes, 500.0 * most);
}

// Batched weight gradients: each B is the input part of one microbatch's
// backward; each stage runs one W after its last B, charged the measured
// per-step W (unmeasured: the weight share of backward_s, as m per-microbatch
// W's would be); every stash lives until that W.
TEST(Simulator, BatchedWeightsRunOneWPerStageAfterItsLastB) {
  auto [prof, plan] = two_stages_across_a_cut(1.0, 4.0, 0);
  prof.layers[0].backward_input_s = 1.0;  // stage 0's: no gradient leaves it
  prof.layers[1].backward_input_s = 2.0;
  SimOptions o;
  o.microbatches = 4;
  o.batched_weights = {true, true};
  for (ScheduleKind k : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB})
    for (bool measured : {false, true}) {
      prof.layers[0].backward_weight_step_s = measured ? 2.5 : -1;
      prof.layers[1].backward_weight_step_s = measured ? 1.0 : -1;
      const std::string what = std::string(schedule_name(k)) + (measured ? ", measured" : "");
      const SimResult r = simulate(plan, prof, k, o);
      validate(r.schedule_ops);
      std::map<int, std::vector<TimedOp>> w_ops;
      std::map<int, double> last_b_end;
      for (const auto& t : r.run.ops) {
        if (t.op.kind == OpKind::kBackward) ADD_FAILURE() << what << ": a whole backward ran";
        if (t.op.kind == OpKind::kBackwardInput) {
          EXPECT_DOUBLE_EQ(t.end - t.start, t.op.stage == 0 ? 0.0 : 0.5) << what;
          last_b_end[t.op.stage] = std::max(last_b_end[t.op.stage], t.end);
        }
        if (t.op.kind == OpKind::kBackwardWeight) w_ops[t.op.stage].push_back(t);
      }
      for (int st : {0, 1}) {
        ASSERT_EQ(w_ops[st].size(), 1u) << what;
        const TimedOp& w = w_ops[st][0];
        EXPECT_EQ(w.op.microbatch, kWholeStep) << what;
        EXPECT_GE(w.start, last_b_end[st]) << what;
        const double want = measured ? (st == 0 ? 2.5 : 1.0) : (st == 0 ? 4.0 : 2.0);
        EXPECT_DOUBLE_EQ(w.end - w.start, want) << what << ", stage " << st;
        EXPECT_EQ(r.stages[static_cast<size_t>(st)].peak_in_flight, 4) << what;
      }
      // gpipe: stage 1's B's end at 1.25 + 4 x 0.5 = 3.25, where stage 0's
      // last gradient arrives and its W of 2.5 begins.
      if (k == ScheduleKind::kGPipe && measured) {
        EXPECT_DOUBLE_EQ(r.makespan_s, 5.75);
      }
    }
  // The W over the whole step waits for every B of its stage.
  ScheduleShape shape;
  shape.replicas = {1, 1};
  shape.microbatches = 3;
  shape.batched_weights = {true, true};
  Schedule s = build_schedule(ScheduleKind::kGPipe, shape);
  validate(s);
  auto& prog = s.programs[1];
  auto w = std::find_if(prog.begin(), prog.end(),
                        [](const ScheduleOp& op) { return op.kind == OpKind::kBackwardWeight; });
  ASSERT_NE(w, prog.end());
  const ScheduleOp moved = *w;
  prog.erase(w);
  prog.insert(prog.begin() + 4, moved);  // after the forwards, before any B
  EXPECT_THROW(validate(s), PlanError);
  EXPECT_THROW(build_schedule(ScheduleKind::kZeroBubbleH1, shape), PlanError);
  shape.replicas = {2, 1};
  EXPECT_THROW(build_schedule(ScheduleKind::kOneFOneB, shape), PlanError);
  // Per stage: the first keeps whole backwards, the second batches.
  shape.batched_weights = {false, true};
  shape.replicas = {2, 1};
  for (ScheduleKind k : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB}) {
    const Schedule mixed = build_schedule(k, shape);
    validate(mixed);
    for (const auto& prog : mixed.programs)
      for (const auto& op : prog) {
        const bool split = op.kind == OpKind::kBackwardInput || op.kind == OpKind::kBackwardWeight;
        if (op.kind == OpKind::kBackward || split) {
          EXPECT_EQ(op.stage, split ? 1 : 0) << schedule_name(k);
        }
      }
  }
  // The choice by simulation is no slower than any of its candidates.
  SimOptions choose;
  choose.microbatches = 4;
  for (ScheduleKind k : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB}) {
    const std::vector<bool> best =
        best_batched_weights(plan, prof, k, choose, std::numeric_limits<double>::infinity());
    choose.batched_weights = best;
    const double t = simulate(plan, prof, k, choose).time_per_minibatch_s;
    for (const std::vector<bool>& other :
         {std::vector<bool>{}, std::vector<bool>{false, true}, std::vector<bool>{true, true}}) {
      choose.batched_weights = other;
      EXPECT_LE(t, simulate(plan, prof, k, choose).time_per_minibatch_s) << schedule_name(k);
    }
    choose.batched_weights = {};
  }
  EXPECT_TRUE(best_batched_weights(plan, prof, ScheduleKind::kPipeDream, choose).empty());
  // Memory: a batched stage keeps of each microbatch, from its B to the W,
  // only what the W reads. Stage 1 stashes 1,000 bytes per minibatch (250 a
  // microbatch), its W reads 400 (100): under 1F1B it holds at most
  // 3 x 100 + 250 after its fourth forward; unknown, the whole stash.
  auto [mem_prof, mem_plan] = two_stages_across_a_cut(1.0, 4.0, 0);
  mem_prof.layers[1].output_bytes = 1000;
  SimOptions mem;
  mem.microbatches = 4;
  mem.batched_weights = {false, true};
  EXPECT_DOUBLE_EQ(
      simulate(mem_plan, mem_prof, ScheduleKind::kOneFOneB, mem).stages[1].peak_activation_bytes,
      1000);
  mem_prof.weight_reads_known = true;
  mem_prof.weight_reads = {{"x", 400, 1, 1, {1}}};
  EXPECT_DOUBLE_EQ(
      simulate(mem_plan, mem_prof, ScheduleKind::kOneFOneB, mem).stages[1].peak_activation_bytes,
      550);
  // Batching stage 1 is faster here (its W 0.5 s a step, not 4 x 0.5), but
  // under 1F1B it keeps 4 microbatches for 1: auto leaves it unless allowed.
  mem_prof.layers[1].backward_input_s = 2.0;
  mem_prof.layers[1].backward_weight_step_s = 0.5;
  mem.batched_weights = {};
  EXPECT_TRUE(best_batched_weights(mem_plan, mem_prof, ScheduleKind::kOneFOneB, mem).empty());
  EXPECT_EQ(best_batched_weights(mem_plan, mem_prof, ScheduleKind::kOneFOneB, mem,
                                 std::numeric_limits<double>::infinity()),
            (std::vector<bool>{false, true}));
}

// Interleaved 1F1B on the worker view of p x v virtual stages: each chunk
// runs and keeps its own, not an equal slice of its worker's total.
TEST(Simulator, InterleavedChunksRunAndKeepTheirOwn) {
  Profile prof;
  prof.stash_at_readers = true;
  // Virtual stages 0..3 (worker 0 holds 0 and 2, worker 1 holds 1 and 3);
  // only the last one stashes anything.
  const double forward[4] = {1, 2, 3, 6};
  for (int s = 0; s < 4; ++s)
    prof.layers.push_back(
        {std::string(1, char('a' + s)), forward[s], 2 * forward[s], s == 3 ? 800 : 0, 0, 0, {}, 0});
  Topology t;
  t.levels = {{4, 1e9}};
  const Plan virtual_plan = evaluate_plan(prof, t, {0, 1, 2, 3}, {1, 1, 1, 1}, "test");
  auto [plan, view] = interleaved_worker_view(virtual_plan, prof, 2);
  SimOptions o;
  o.microbatches = 4;
  o.chunks = 2;
  const SimResult r = simulate(plan, view, ScheduleKind::kInterleaved, o);
  for (const auto& op : r.run.ops)
    if (op.op.kind == OpKind::kForward) {
      EXPECT_DOUBLE_EQ(op.end - op.start, forward[op.op.stage] / 4) << "stage " << op.op.stage;
    }
  // Virtual stage 3, the last, runs each microbatch's backward right after
  // its forward: one stash of 800 / 4 bytes at a time on worker 1.
  EXPECT_DOUBLE_EQ(r.stages[1].peak_activation_bytes, 200.0);
  EXPECT_DOUBLE_EQ(r.stages[0].peak_activation_bytes, 0.0);
}

TEST(Simulator, TransfersAndAllreduceTakeTime) {
  // 1e9 bytes cross the cut at 1e9 B/s: 2 s each way per minibatch, which
  // overlaps compute but is longer than it.
  auto [prof, plan] = two_stages_across_a_cut(0.5, 0.5, 1'000'000'000);
  SimOptions o;
  o.microbatches = 1;
  SimResult r = simulate(plan, prof, ScheduleKind::kGPipe, o);
  // F0 [0, .5], send [.5, 1.5], F1 [1.5, 2], B1 [2, 2.5], send [2.5, 3.5], B0 [3.5, 4].
  EXPECT_DOUBLE_EQ(r.makespan_s, 4.0);
  // A link's latency adds to each message: two messages on the critical path.
  plan.topology.levels[0].latency_s = 0.25;
  EXPECT_DOUBLE_EQ(simulate(plan, prof, ScheduleKind::kGPipe, o).makespan_s, 4.5);
  // The DP's cost model prices it too: (1e9 B / 1e9 B/s + 0.25 s) per direction.
  const ChainCosts costs(prof, plan.topology);
  EXPECT_DOUBLE_EQ(costs.stage(0, 0, 0, 1, 1).transfer_out_s, 2 * 1.25);
}

TEST(Schedule, ValidatorFindsDeadlocksAndGaps) {
  Schedule s;
  s.name = "bad";
  s.num_stages = 2;
  s.num_microbatches = 1;
  s.stage_workers = {{0}, {1}};
  // Both workers wait for the other first.
  s.programs = {{{OpKind::kRecv, 1, 0, Payload::kGradient, 1},
                 {OpKind::kForward, 0, 0},
                 {OpKind::kBackward, 0, 0}},
                {{OpKind::kRecv, 0, 0, Payload::kActivation, 0},
                 {OpKind::kForward, 1, 0},
                 {OpKind::kBackward, 1, 0},
                 {OpKind::kSend, 1, 0, Payload::kGradient, 0}}};
  EXPECT_THROW(validate(s), PlanError);
  ScheduleShape shape;
  shape.replicas = {1, 1};
  shape.microbatches = 2;
  Schedule good = build_schedule(ScheduleKind::kOneFOneB, shape);
  validate(good);
  Schedule missing = good;
  missing.programs[1].erase(missing.programs[1].begin() + 1);  // drop F1.0
  EXPECT_THROW(validate(missing), PlanError);
  try {
    execute(s, {});
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("deadlocks"), std::string::npos);
  }
  EXPECT_THROW(build_schedule(ScheduleKind::kInterleaved, {{2, 1}, 4, 2, 3, true, {}}), PlanError);
  EXPECT_THROW(parse_schedule_kind("fifo"), PlanError);
}

TEST(Simulator, TimelinesNameEveryOp) {
  Uniform u(2, 2.0);
  SimOptions o;
  o.microbatches = 2;
  SimResult r = simulate(u.plan, u.profile, ScheduleKind::kGPipe, o);
  auto trace = nlohmann::json::parse(chrome_trace({r}));
  int slices = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") ++slices;
  EXPECT_EQ(slices, 8);  // F and B of 2 microbatches on 2 stages
  std::string svg = svg_timeline({r});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("F1.1"), std::string::npos);
  // A legend and a time axis: F 1 s + B 2 s per microbatch, makespan 9 s, ticks every 2 s.
  for (const char* key : {"forward", "weight gradient", "wait (receive)", "optimizer step"})
    EXPECT_NE(svg.find(key), std::string::npos) << key;
  EXPECT_NE(svg.find(">0 ms<"), std::string::npos);
  EXPECT_NE(svg.find(">8000 ms<"), std::string::npos);
  EXPECT_EQ(svg.find(">10000 ms<"), std::string::npos);
  EXPECT_DOUBLE_EQ(r.makespan_s, 9.0);
  // Each F and B box (a sixth of the width or more) carries its microbatch; one chunk
  // per worker, drawn opaque.
  auto count = [](const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(svg, "font-size=\"9\">"), 8);
  EXPECT_EQ(count(svg, "font-size=\"9\">1<"), 4);
  EXPECT_EQ(count(svg, "fill-opacity=\"0.6\""), 0);
  // A V: each worker's second chunk (F, B, W of 2 microbatches) paler.
  const std::string v = svg_timeline({simulate(u.plan, u.profile, ScheduleKind::kZeroBubbleV, o)});
  EXPECT_EQ(count(v, "fill-opacity=\"0.6\""), 2 * 3 * 2);
}

}  // namespace
}  // namespace pipetrain::partitioner
