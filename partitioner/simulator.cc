#include "partitioner/simulator.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "ir/error.h"
#include "partitioner/cost_model.h"

namespace pipetrain::partitioner {

namespace {

struct StageData {
  double backward_input_s = -1;  // negative: not measured
  double weight_step_s = -1;     // batched W over a step; negative: not measured
  double weight_stash = -1;      // of stash_bytes, what the W part reads; negative: all
  double carry = 0;              // kept from B to W under zero-bubble schedules
  double forward_s = 0, backward_s = 0, update_s = 0, accumulate_s = 0, param_bytes = 0,
         stash_bytes = 0, cut_out = 0, cut_in = 0, inputs = 0;
  bool recompute = false;  // the plan's stage, or SimOptions::recompute for all
};

std::vector<StageData> stage_data(const Plan& plan, const Profile& profile, bool recompute) {
  std::vector<StageData> out;
  for (const auto& st : plan.stages) {
    StageData d;
    d.recompute = recompute || st.recompute;
    bool split_known = true, step_known = true;
    double input_part = 0, weight_step = 0;
    for (int l = st.first_layer; l <= st.last_layer; ++l) {
      const LayerProfile& lp = profile.layers[l];
      split_known = split_known && lp.backward_input_s >= 0;
      input_part += std::max(0.0, lp.backward_input_s);
      step_known = step_known && lp.backward_weight_step_s >= 0;
      weight_step += std::max(0.0, lp.backward_weight_step_s);
      d.forward_s += lp.forward_s;
      d.backward_s += lp.backward_s;
      d.update_s += lp.update_s;
      d.accumulate_s += lp.accumulate_s;
      d.param_bytes += static_cast<double>(lp.param_bytes);
      d.stash_bytes += static_cast<double>(lp.output_bytes);
      d.inputs += static_cast<double>(lp.input_bytes);
      d.carry += static_cast<double>(lp.carry_bytes);
    }
    // The first stage sends no gradient upstream: its B op has nothing to do.
    if (split_known) d.backward_input_s = st.first_layer > 0 ? input_part : 0.0;
    if (step_known) d.weight_step_s = weight_step;
    if (st.first_layer > 0) {
      d.cut_in = static_cast<double>(profile.layers[st.first_layer - 1].cut_bytes);
      // With the stash at its readers: received tensors whose first reader
      // is upstream, the rest being in the layers' output_bytes.
      const LayerProfile& before = profile.layers[st.first_layer - 1];
      d.stash_bytes +=
          profile.stash_at_readers ? static_cast<double>(before.cut_stash_bytes) : d.cut_in;
    }
    d.cut_out = st.last_layer + 1 < static_cast<int>(profile.layers.size())
                    ? static_cast<double>(profile.layers[st.last_layer].cut_bytes)
                    : 0.0;
    // The first stage's B does nothing: it carries only the gradient it
    // received (its W computes the rest itself), as large as what it sent.
    if (st.first_layer == 0) d.carry = d.cut_out;
    // What the W part reads: the first stage's W is its whole backward.
    if (st.first_layer > 0)
      d.weight_stash =
          static_cast<double>(profile.weight_stash_bytes(st.first_layer, st.last_layer));
    out.push_back(d);
  }
  return out;
}

// Interleaved 1F1B: what each chunk (virtual stage c * p + w of worker w)
// runs and keeps. On interleaved_worker_view's plan, whose worker stages hold
// one profile layer per chunk, each chunk's own figures (the stash and
// cuts of the chunks either side in the model, not in the profile's order);
// on any other plan, equal slices of the worker's stage. `per_chunk` says
// which.
std::vector<StageData> chunk_data(const Plan& plan, const Profile& profile,
                                  const std::vector<StageData>& data,
                                  const std::vector<ChunkPlace>& places, bool recompute,
                                  bool* per_chunk) {
  const int p = static_cast<int>(plan.stages.size());
  const int n = static_cast<int>(places.size());
  std::vector<int> held(static_cast<size_t>(p), 0);  // chunks per worker
  for (const ChunkPlace& at : places) ++held[static_cast<size_t>(at.worker)];
  *per_chunk = n > p;
  for (int w = 0; w < p; ++w) {
    const auto& st = plan.stages[static_cast<size_t>(w)];
    *per_chunk = *per_chunk && st.last_layer - st.first_layer + 1 == held[static_cast<size_t>(w)];
  }
  std::vector<StageData> out;
  auto layer_of = [&](int s) -> const LayerProfile& {
    const ChunkPlace at = places[static_cast<size_t>(s)];
    return profile.layers[static_cast<size_t>(
        plan.stages[static_cast<size_t>(at.worker)].first_layer + at.chunk)];
  };
  for (int s = 0; s < n; ++s) {
    const int worker = places[static_cast<size_t>(s)].worker;
    StageData d = data[static_cast<size_t>(worker)];
    if (!*per_chunk) {
      const double v = held[static_cast<size_t>(worker)];
      for (double* f : {&d.forward_s, &d.backward_s, &d.update_s, &d.accumulate_s, &d.param_bytes,
                        &d.stash_bytes, &d.cut_in, &d.inputs, &d.carry})
        *f /= v;
      if (d.backward_input_s > 0) d.backward_input_s /= v;
      out.push_back(d);
      continue;
    }
    const LayerProfile& l = layer_of(s);
    d = StageData();
    d.recompute = recompute || plan.stages[static_cast<size_t>(worker)].recompute;
    d.forward_s = l.forward_s;
    d.backward_s = l.backward_s;
    d.update_s = l.update_s;
    d.accumulate_s = l.accumulate_s;
    d.param_bytes = static_cast<double>(l.param_bytes);
    d.stash_bytes = static_cast<double>(l.output_bytes);
    d.inputs = static_cast<double>(l.input_bytes);
    d.carry = static_cast<double>(l.carry_bytes);
    d.backward_input_s = l.backward_input_s;
    if (s > 0) {
      const LayerProfile& before = layer_of(s - 1);
      d.cut_in = static_cast<double>(before.cut_bytes);
      d.stash_bytes +=
          profile.stash_at_readers ? static_cast<double>(before.cut_stash_bytes) : d.cut_in;
    }
    d.cut_out = s + 1 < n ? static_cast<double>(l.cut_bytes) : 0.0;
    if (s == 0) {  // as stage_data's first stage
      if (d.backward_input_s >= 0) d.backward_input_s = 0;
      d.carry = d.cut_out;
    }
    out.push_back(d);
  }
  return out;
}

}  // namespace

std::pair<Plan, Profile> interleaved_worker_view(const Plan& plan, const Profile& prof, int workers,
                                                 ScheduleKind kind) {
  const int n = static_cast<int>(plan.stages.size());
  if (workers < 1 || n % workers != 0)
    throw PlanError(std::to_string(n) + " virtual stages do not split over " +
                    std::to_string(workers) + " workers");
  const int v = n / workers;
  if (v_shaped(kind) && v != 2)
    throw PlanError(fmt::format("{} holds 2 chunks per worker: {} virtual stages on {} workers",
                                schedule_name(kind), n, workers));
  std::vector<std::vector<int>> held(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w)
    for (int c = 0; c < v; ++c)
      held[static_cast<size_t>(w)].push_back(chunk_stage(kind, w, c, workers));
  return worker_view(plan, prof, held, schedule_name(kind));
}

std::pair<Plan, Profile> worker_view(const Plan& plan, const Profile& prof,
                                     const std::vector<std::vector<int>>& held,
                                     const std::string& config) {
  const int workers = static_cast<int>(held.size());
  Profile out;
  out.model = prof.model;
  out.batch = prof.batch;
  out.stash_at_readers = prof.stash_at_readers;
  std::vector<int> last, reps(static_cast<size_t>(workers), 1);
  for (const auto& stages : held) {
    for (const int vs : stages) {
      const auto& st = plan.stages.at(static_cast<size_t>(vs));
      LayerProfile l;
      l.name = fmt::format("virtual stage {}", vs);
      l.backward_input_s = 0;
      for (int k = st.first_layer; k <= st.last_layer; ++k) {
        const auto& src = prof.layers[static_cast<size_t>(k)];
        l.forward_s += src.forward_s;
        l.backward_s += src.backward_s;
        l.backward_input_s = l.backward_input_s < 0 || src.backward_input_s < 0
                                 ? -1.0
                                 : l.backward_input_s + src.backward_input_s;
        l.update_s += src.update_s;
        l.accumulate_s += src.accumulate_s;
        l.output_bytes += src.output_bytes;
        l.carry_bytes += src.carry_bytes;
        l.input_bytes += src.input_bytes;
        l.param_bytes += src.param_bytes;
      }
      l.cut_bytes = prof.layers[static_cast<size_t>(st.last_layer)].cut_bytes;
      l.cut_stash_bytes = prof.layers[static_cast<size_t>(st.last_layer)].cut_stash_bytes;
      out.layers.push_back(std::move(l));
    }
    last.push_back(static_cast<int>(out.layers.size()) - 1);
  }
  Topology t = plan.topology;
  if (t.workers() != workers) t = parse_topology(std::to_string(workers), "10e9", "");
  return {evaluate_plan(out, t, last, reps, config), out};
}

SimResult simulate(const Plan& plan, const Profile& profile, ScheduleKind kind,
                   const SimOptions& options) {
  check_against_profile(plan, profile);
  const int p = static_cast<int>(plan.stages.size());
  const auto data = stage_data(plan, profile, options.recompute);
  ScheduleShape shape;
  for (const auto& st : plan.stages) shape.replicas.push_back(st.replication);
  // Lanes: a replicated stage runs one minibatch per replica at a time, so a
  // step carries `lanes` minibatches (the largest replication), each split
  // into m microbatches; pipedream runs 8 rounds of every replica by default.
  int lanes = 1, workers = 0;
  for (const auto& st : plan.stages)
    lanes = std::max(lanes, st.replication), workers += st.replication;
  const bool from_file = kind == ScheduleKind::kFromFile;
  if (from_file && !options.schedule)
    throw PlanError("simulate: a schedule from a file needs SimOptions::schedule");
  const int m = from_file                  ? options.schedule->num_microbatches
                : options.microbatches > 0 ? options.microbatches
                                           : 4 * p;
  if (kind == ScheduleKind::kPipeDream)
    shape.microbatches = options.microbatches > 0 ? options.microbatches : 8 * std::max(p, workers);
  else
    shape.microbatches = m * lanes;
  shape.chunks = options.chunks;
  shape.steps = options.steps;
  shape.overlap_allreduce = options.overlap_allreduce;
  shape.batched_weights = options.batched_weights;
  if (kind == ScheduleKind::kInterleaved && shape.microbatches % p != 0)
    throw PlanError("interleaved 1F1B needs microbatches divisible by the stages (" +
                    std::to_string(p) + ")");

  SimResult res;
  res.schedule = from_file ? options.schedule->name : schedule_name(kind);
  res.microbatches = shape.microbatches;
  res.schedule_ops = from_file ? *options.schedule : build_schedule(kind, shape);
  const bool interleaved = kind == ScheduleKind::kInterleaved;
  // Where each schedule stage of several chunks per worker lives: the worker (its
  // plan stage) and which of its chunks, in stage order (place_chunk's, for ours).
  std::vector<ChunkPlace> places;
  bool chunked = chunks_per_worker(kind, options.chunks) > 1;
  if (from_file) {
    const Schedule& f = res.schedule_ops;
    bool identity = f.num_stages == p && static_cast<int>(f.programs.size()) == p;
    for (int st = 0; st < f.num_stages; ++st)
      identity = identity && f.stage_workers[static_cast<size_t>(st)] == std::vector<int>{st};
    if (lanes > 1) throw PlanError("a schedule from a file runs unreplicated stages");
    if (!identity && static_cast<int>(f.programs.size()) != p)
      throw PlanError(fmt::format(
          "the schedule runs {} stages on {} workers, and this plan has {} stages: it needs "
          "stage s on worker s, or {} workers (each plan stage cut into the chunks its worker "
          "holds)",
          f.num_stages, f.programs.size(), p, p));
    chunked = !identity;
  }
  std::vector<int> chunks_on(static_cast<size_t>(p), 1);  // per plan stage (worker)
  if (chunked) {
    std::fill(chunks_on.begin(), chunks_on.end(), 0);
    for (int st = 0; st < res.schedule_ops.num_stages; ++st) {
      const int w = res.schedule_ops.stage_workers[static_cast<size_t>(st)].front();
      places.push_back({w, chunks_on[static_cast<size_t>(w)]++});
    }
  }
  // Tied params whose readers fall in several stages (not modelled with
  // several chunks per worker).
  std::vector<double> tied_bytes;
  if (!chunked) {
    std::map<std::vector<int>, double> groups;  // sharing stages -> bytes
    for (const auto& t : profile.tied) {
      std::set<int> stages;
      for (int l : t.layers)
        for (int st = 0; st < p; ++st)
          if (l >= plan.stages[st].first_layer && l <= plan.stages[st].last_layer)
            stages.insert(st);
      if (stages.size() > 1) groups[{stages.begin(), stages.end()}] += static_cast<double>(t.bytes);
    }
    if (options.synced_updates && p > 1 && !(options.post_validation && flush_schedule(kind))) {
      // One meeting of all stages, carrying the tied params' allreduces too.
      double bytes = 0;
      for (const auto& [stages, b] : groups) bytes += b;
      std::vector<int> all(static_cast<size_t>(p));
      std::iota(all.begin(), all.end(), 0);
      groups = {{all, bytes}};
    }
    for (const auto& [stages, bytes] : groups) {
      res.schedule_ops.tied_groups.push_back(stages);
      tied_bytes.push_back(bytes);
    }
    res.schedule_ops.tied_delayed = tied_gradients_delayed(kind, options.synced_updates);
  }
  const Schedule& s = res.schedule_ops;
  // A microbatch is 1/m of the minibatch except in pipedream.
  const double scale = kind == ScheduleKind::kPipeDream ? 1.0 : 1.0 / m;

  // Schedule stage -> plan stage, schedule worker -> plan worker.
  auto plan_stage = [&](int stage) {
    return chunked ? places[static_cast<size_t>(stage)].worker : stage;
  };
  for (int st = 0; st < s.num_stages; ++st)
    for (size_t q = 0; q < s.stage_workers[st].size(); ++q) {
      int w = s.stage_workers[st][q];
      if (static_cast<int>(res.physical_workers.size()) <= w) res.physical_workers.resize(w + 1);
      res.physical_workers[w] = plan.stages[plan_stage(st)].workers[q];
    }
  double mean_cut = 0;
  for (const auto& d : data) mean_cut += d.cut_out / std::max(1, p - 1);
  // Per schedule stage (a chunk when interleaved): what its ops run and keep.
  bool per_chunk = false;
  const std::vector<StageData> sched =
      chunked ? chunk_data(plan, profile, data, places, options.recompute, &per_chunk) : data;

  auto input_part = [](const StageData& d) {
    return d.backward_input_s >= 0 ? std::min(d.backward_input_s, d.backward_s)
                                   : 0.5 * d.backward_s;
  };
  ScheduleCosts costs;
  costs.compute = [&](int, const ScheduleOp& op) {
    const StageData& d = sched[static_cast<size_t>(op.stage)];
    // Recomputation runs the forward again before the backward.
    const double again = d.recompute ? d.forward_s * scale : 0.0;
    switch (op.kind) {
      case OpKind::kForward: return d.forward_s * scale;
      case OpKind::kBackward:
        // With m microbatches per step, m - 1 of every m backwards add their
        // gradients into the step's sum.
        return again + d.backward_s * scale +
               (kind == ScheduleKind::kPipeDream ? 0.0 : d.accumulate_s * (m - 1) / m);
      // Zero-bubble: B as measured (half the backward where not), W the rest
      // with the gradient accumulation, which adds the weight gradients.
      case OpKind::kBackwardInput: return again + input_part(d) * scale;
      case OpKind::kBackwardWeight:
        // Batched: the whole step's at once, into the step's sum directly.
        if (op.microbatch == kWholeStep)
          return d.weight_step_s >= 0 ? d.weight_step_s : d.backward_s - input_part(d);
        return (d.backward_s - input_part(d)) * scale + d.accumulate_s * (m - 1) / m;
      case OpKind::kStep: return d.update_s;  // once per step, whatever the microbatches
      default: return 0.0;
    }
  };
  costs.transfer = [&](int from, int to, const ScheduleOp& op) {
    int a = res.physical_workers[from], b = res.physical_workers[to];
    double bw = plan.topology.slowest_link(std::min(a, b), std::abs(a - b) + 1);
    // The producer's cut: after stage op.stage going forward, before it going back.
    int ps = plan_stage(op.stage);
    double bytes;
    if (per_chunk)  // the cut after the sending chunk, or after the one before it
      bytes =
          sched[static_cast<size_t>(op.payload == Payload::kActivation ? op.stage : op.stage - 1)]
              .cut_out;
    else if (interleaved && ((op.payload == Payload::kActivation && ps == p - 1) ||
                             (op.payload == Payload::kGradient && ps == 0)))
      bytes = mean_cut;  // the wrap-around between chunks
    else if (chunked && (from_file || places[static_cast<size_t>(op.stage)].chunk == 1))
      bytes = mean_cut;  // a V's way back up, or anywhere: cuts inside the workers' stages
    else
      bytes = op.payload == Payload::kActivation ? data[ps].cut_out : data[ps - 1].cut_out;
    return bytes * scale / bw +
           plan.topology.slowest_link_latency(std::min(a, b), std::abs(a - b) + 1);
  };
  costs.allreduce = [&](int stage, int) {
    const auto& st = plan.stages[plan_stage(stage)];
    int r = st.replication;
    if (r <= 1) return 0.0;
    double bw =
        plan.topology.slowest_link(st.workers.front(), st.workers.back() - st.workers.front() + 1);
    const double latency = plan.topology.slowest_link_latency(
        st.workers.front(), st.workers.back() - st.workers.front() + 1);
    return 4.0 * (r - 1) * sched[static_cast<size_t>(stage)].param_bytes / (bw * r) +
           2.0 * (r - 1) * latency;  // a ring's 2(r - 1) steps
  };
  costs.tied_allreduce = [&](int group) {
    // A ring over the k copies' workers: 2 (k - 1) / k of the bytes each way.
    const auto& stages = s.tied_groups[group];
    const double k = static_cast<double>(stages.size());
    const int lo = plan.stages[stages.front()].workers.front();
    const int hi = plan.stages[stages.back()].workers.back();
    if (s.tied_delayed)  // one partial from each other copy, point to point
      return tied_bytes[group] / plan.topology.slowest_link(lo, hi - lo + 1) +
             plan.topology.slowest_link_latency(lo, hi - lo + 1);
    return 2.0 * (k - 1) / k * tied_bytes[group] / plan.topology.slowest_link(lo, hi - lo + 1) +
           2.0 * (k - 1) * plan.topology.slowest_link_latency(lo, hi - lo + 1);
  };
  costs.activation_bytes = [&](int stage) {
    const StageData& d = sched[static_cast<size_t>(stage)];
    // Recomputation keeps the forward's inputs: received and fed.
    return (d.recompute ? d.cut_in + d.inputs : d.stash_bytes) * scale;
  };
  costs.carry_bytes = [&](int stage) { return sched[static_cast<size_t>(stage)].carry * scale; };
  costs.weight_activation_bytes = [&](int stage) {
    const StageData& d = sched[static_cast<size_t>(stage)];
    // Recomputation refills the whole stash before B and keeps it to W.
    if (d.recompute) return (d.cut_in + d.inputs) * scale;
    return (d.weight_stash >= 0 ? d.weight_stash : d.stash_bytes) * scale;
  };
  res.run = execute(s, costs);
  const ScheduleRun& run = res.run;
  res.makespan_s = run.makespan;
  double busy = std::accumulate(run.busy_s.begin(), run.busy_s.end(), 0.0);
  res.bubble_fraction =
      run.makespan > 0 ? 1.0 - busy / (double(run.busy_s.size()) * run.makespan) : 0.0;

  if (kind == ScheduleKind::kPipeDream || kind == ScheduleKind::kTwoBW) {
    // Steady state: the mean interval between stage 0's backward ends over
    // the middle half of the run (fill and drain excluded).
    std::vector<double> ends;
    for (const auto& t : run.ops)
      if (plan_stage(t.op.stage) == 0 && t.op.kind == OpKind::kBackward) ends.push_back(t.end);
    std::sort(ends.begin(), ends.end());
    // Whole rounds of stage 0's replicas, which finish together.
    const size_t r0 = plan.stages[0].replication, rounds = ends.size() / r0;
    const size_t k1 = std::max<size_t>(1, rounds / 4), k2 = std::max(k1 + 1, 3 * rounds / 4);
    double per = k2 <= rounds ? (ends[k2 * r0 - 1] - ends[k1 * r0 - 1]) / double((k2 - k1) * r0)
                              : run.makespan / std::max<size_t>(1, ends.size());
    res.time_per_minibatch_s = kind == ScheduleKind::kTwoBW ? per * m : per;
  } else {
    res.time_per_minibatch_s = run.makespan / lanes;
  }
  if (profile.batch > 0 && res.time_per_minibatch_s > 0)
    res.samples_per_s = double(profile.batch) / res.time_per_minibatch_s;

  // Post-validation: a worker whose update comes before another's norm part updates
  // ahead and keeps a copy for the redo. Which workers do depends on timing (under
  // ASan the simulated last one went ahead too), so the peak counts it on every worker.
  const bool post_validated =
      options.synced_updates && options.post_validation && flush_schedule(kind);
  auto keeps_copy = [&](int) { return post_validated; };
  res.stages.assign(p, {});
  for (int st = 0; st < s.num_stages; ++st)
    for (int w : s.stage_workers[st]) {
      StageSimStats& out = res.stages[plan_stage(st)];
      out.peak_in_flight = std::max(out.peak_in_flight, run.peak_in_flight[w]);
      // 2BW's later forwards run on the version before the newest (W(t+1) =
      // W(t) - lr grad f(W(t-1))): after its first update every stage holds
      // two, the last one too, though no microbatch of its spans an update.
      const int versions = kind == ScheduleKind::kTwoBW && shape.steps > 1
                               ? std::max(2, run.peak_weight_versions[w])
                               : run.peak_weight_versions[w];
      out.weight_versions = std::max(out.weight_versions, versions);
      double params = data[plan_stage(st)].param_bytes;
      // Recomputation: one microbatch's activations exist again during its backward.
      const StageData& d = data[plan_stage(st)];
      const double refilled = d.recompute
                                  ? std::max(0.0, d.stash_bytes - d.cut_in - d.inputs) * scale /
                                        chunks_on[static_cast<size_t>(plan_stage(st))]
                                  : 0.0;
      out.peak_activation_bytes =
          std::max(out.peak_activation_bytes, run.peak_activation_bytes[w] + refilled);
      // Gradients: one set, or two where a round's allreduce overlaps the
      // next round's backward (pipedream's replicas).
      const int grad_sets = kind == ScheduleKind::kPipeDream && options.overlap_allreduce &&
                                    plan.stages[plan_stage(st)].replication > 1
                                ? 2
                                : 1;
      // Post-validation keeps the weights and optimizer state from before an update.
      const double before_update = keeps_copy(w) ? 1 + options.optimizer_state : 0;
      out.peak_memory_bytes =
          std::max(out.peak_memory_bytes,
                   run.peak_activation_bytes[w] + refilled +
                       (versions + grad_sets + options.optimizer_state + before_update) * params);
    }
  return res;
}

std::vector<bool> best_batched_weights(const Plan& plan, const Profile& profile, ScheduleKind kind,
                                       const SimOptions& options, double max_memory_growth) {
  if (kind != ScheduleKind::kGPipe && kind != ScheduleKind::kOneFOneB) return {};
  const size_t p = plan.stages.size();
  for (const auto& st : plan.stages)
    if (st.replication != 1) return {};
  std::vector<bool> all_but_first(p, true);
  all_but_first[0] = false;
  std::vector<bool> best;
  SimOptions o = options;
  o.batched_weights = {};
  const SimResult plain = simulate(plan, profile, kind, o);
  double best_time = plain.time_per_minibatch_s;
  for (const auto& candidate : {all_but_first, std::vector<bool>(p, true)}) {
    o.batched_weights = candidate;
    const SimResult r = simulate(plan, profile, kind, o);
    bool fits = true;  // the stashes kept until the W must not raise any stage's peak
    for (size_t s = 0; s < p && !std::isinf(max_memory_growth); ++s)
      fits = fits && r.stages[s].peak_memory_bytes <=
                         plain.stages[s].peak_memory_bytes * (1 + max_memory_growth) + 1;
    if (fits && r.time_per_minibatch_s < best_time * (1 - 1e-9))
      best_time = r.time_per_minibatch_s, best = candidate;
  }
  return best;
}

}  // namespace pipetrain::partitioner
