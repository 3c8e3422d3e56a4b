#include "executor/pipeline/pipeline.h"

#include <fmt/core.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "executor/comm/local_communicator.h"
#include "executor/pipeline/delayed_ties.h"
#include "executor/pipeline/version_plan.h"
#include "executor/pipeline/whole_minibatch.h"
#include "ir/error.h"

namespace pipetrain::exec {

using partitioner::OpKind;
using partitioner::Payload;
using partitioner::ScheduleKind;
using Clock = std::chrono::steady_clock;

struct Pipeline::Worker {
  int index = 0, stage = 0, replica = 0;
  std::unique_ptr<Backend> backend;
  // The stages this worker holds: one, or one per chunk (interleaved: virtual
  // stages c p + w; a V: w and 2p - 1 - w; partitioner::place_chunk).
  std::map<int, std::unique_ptr<StageWorker>> sws;
  Communicator* comm = nullptr;
  std::thread thread;
  std::vector<int> cores;  // bound to these when not empty (pin_workers)

  // Round hand-off: run() bumps `posted`, the thread sets `finished` to it.
  std::mutex mu;
  std::condition_variable cv;
  int64_t posted = 0, finished = 0;
  bool quit = false;
  std::exception_ptr error;

  // This round's messages by (stage, microbatch), and results.
  std::map<std::pair<int, int>, TensorMap> inbox_fwd, inbox_bwd, outbox_fwd, outbox_bwd;
  // Tensors one of its chunks sent another (a V's bend, skip connections), by
  // (tensor, microbatch, forward): handed over here, never through the communicator.
  std::map<std::tuple<std::string, int64_t, bool>, ir::Tensor> to_self;
  std::vector<std::pair<int64_t, double>> losses;  // (microbatch, loss)
  std::vector<GradSquares> grad_sq;                // per update of one of its stages
  std::vector<partitioner::TimedOp> ops;
  double busy_s = 0;
  WorkerStats stats;
  // --clip-norm: the scale this round's updates take. A worker of several chunks
  // prepares all of them (and takes the norm) at its round's first update: the
  // round it last did so.
  double clip_coef = 1.0;
  int64_t prepared_round = -1;
  // Post-validation: its parts of the squared norm of update `norm_update` (per param,
  // in norm_params' order), sent while the others' are not all in (`norm_pending`), and
  // the updates taken meanwhile.
  std::vector<double> norm_parts;
  bool norm_pending = false;
  int64_t norm_update = 0;
  std::vector<StageWorker*> provisional;
  // A stage run on the whole minibatch: the feeds of this step's
  // microbatches so far, and the sends (op indices) waiting for its results.
  std::map<int, TensorMap> gathered_fwd, gathered_bwd;
  std::vector<size_t> deferred_sends;
  DelayedTies ties;  // asynchronous 1F1B's tied partials (delayed_ties.h)
};

namespace {

VersionRule version_rule(const PipelineOptions& o) {
  if (o.schedule == ScheduleKind::kTwoBW) return VersionRule::kTwoBW;
  if (o.schedule == ScheduleKind::kPipeDream && o.vertical_sync) return VersionRule::kVerticalSync;
  return VersionRule::kLatest;
}

std::string describe_stages(const std::vector<int>& stages) {
  std::string s;
  for (int st : stages) s += (s.empty() ? "" : ", ") + std::to_string(st);
  return s;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// How long a receive polls before it sleeps: 50 ms where the workers have cores of their
// own (a thread asleep on a VM's idle vCPU wakes slowly), none where they share them.
// PIPETRAIN_RECV_SPIN_US overrides it. The test command sets 0: ctest runs two tests on
// 2 cores, and a polling worker of an unbalanced pipeline took the other test's core
// (beside the accuracy test's LeNet, whose first worker is 28% busy, the ctest phase ran
// at 47% system time).
std::chrono::microseconds recv_spin(bool own_cores) {
  if (const char* env = std::getenv("PIPETRAIN_RECV_SPIN_US"); env && *env) {
    char* end = nullptr;
    const long long us = std::strtoll(env, &end, 10);
    if (*end != '\0' || us < 0)
      throw PlanError(
          fmt::format("PIPETRAIN_RECV_SPIN_US={} is not a number of microseconds", env));
    return std::chrono::microseconds(us);
  }
  return own_cores ? std::chrono::milliseconds(50) : std::chrono::milliseconds(0);
}

}  // namespace

Pipeline::Pipeline(const autodiff::TrainingGraph& tg, std::vector<PipelineStage> stages,
                   PipelineOptions options)
    : stages_(std::move(stages)),
      options_(std::move(options)),
      loss_(tg.loss),
      loss_weight_(tg.loss_weight) {
  const ScheduleKind k = options_.schedule;
  const bool from_file = k == ScheduleKind::kFromFile;
  if (from_file && !options_.schedule_file)
    throw PlanError("a schedule from a file needs PipelineOptions::schedule_file");
  const int chunks = partitioner::chunks_per_worker(k, options_.chunks);
  const std::string schedule =
      from_file ? "schedule '" + options_.schedule_file->name + "'" : partitioner::schedule_name(k);
  if (from_file) {
    const partitioner::Schedule& f = *options_.schedule_file;
    if (f.num_stages != num_stages())
      throw PlanError(
          fmt::format("{} runs {} stages; the plan has {}", schedule, f.num_stages, num_stages()));
    if (f.num_microbatches != options_.microbatches)
      throw PlanError(fmt::format("{} runs {} microbatches per step, not {}", schedule,
                                  f.num_microbatches, options_.microbatches));
    for (const auto& st : stages_)
      if (st.replicas != 1) throw PlanError(schedule + " needs unreplicated stages");
  } else if (k == ScheduleKind::kInterleaved || chunks > 1) {
    // `stages` are the virtual stages: p workers x `chunks` each.
    const int n = static_cast<int>(stages_.size());
    if (chunks < 1 || n % chunks != 0 || n / chunks < 2)
      throw PlanError(schedule + " needs 2 or more workers of " + std::to_string(chunks) +
                      " virtual stages each; " + std::to_string(n) + " stages do not split so");
    for (const auto& st : stages_)
      if (st.replicas != 1) throw PlanError(schedule + " needs unreplicated stages");
  }
  if (options_.vertical_sync && k != ScheduleKind::kPipeDream)
    throw PlanError("--vertical-sync applies to the pipedream schedule only");
  if (options_.microbatches < 1) throw PlanError("the microbatch count must be at least 1");
  options_.lr_schedule.validate();
  std::vector<std::pair<int, int>> ranges;
  for (const auto& st : stages_) {
    if (st.replicas < 1) throw PlanError("every stage needs at least one replica");
    ranges.emplace_back(st.first_layer, st.last_layer);
  }
  for (const auto& st : stages_) {
    if (st.replicas == 1) continue;
    if (options_.vertical_sync)
      throw PlanError("vertical sync needs unreplicated stages (replicas update out of step)");
    // Asynchronous replicas update once per round of their minibatches, the
    // other stages once per minibatch: their updates do not pair up.
    if (options_.clip_norm > 0 && (k == ScheduleKind::kPipeDream || k == ScheduleKind::kTwoBW))
      throw PlanError(std::string("--clip-norm with replicated stages needs a flush schedule "
                                  "(1f1b-flush or gpipe), not ") +
                      partitioner::schedule_name(k));
  }
  if (options_.clip_norm < 0) throw PlanError("--clip-norm must be positive");
  programs_ = build_stage_programs(tg, ranges);
  whole_.assign(programs_.size(), false);
  if (options_.minibatch_graph && options_.microbatches > 1 && k != ScheduleKind::kPipeDream)
    plan_whole_minibatch_stages(ranges);
  plan_batched_weights(ranges);
  for (const auto& prog : programs_)
    for (const auto& [param, sharing] : prog.shared)
      for (int s : sharing)
        if (stages_[static_cast<size_t>(s)].replicas != 1)
          throw PlanError("param '" + param + "' is shared by stages " + describe_stages(sharing) +
                          " (tied weights) and stage " + std::to_string(s) +
                          " is replicated: tied weights need unreplicated stages (use --stages, "
                          "or a plan without replication)");

  // Worker -> the stages it holds, and the replica it runs: stage s's replicas one
  // after another; with several chunks, place_chunk's; a schedule file's placement.
  std::vector<std::vector<int>> held;
  std::vector<int> replica_of;
  if (from_file) {
    held.resize(options_.schedule_file->programs.size());
    for (int s = 0; s < num_stages(); ++s)
      held.at(static_cast<size_t>(options_.schedule_file->stage_workers[s].front())).push_back(s);
    for (size_t w = 0; w < held.size(); ++w)
      if (held[w].empty())
        throw PlanError(fmt::format("{}: worker {} holds no stage", schedule, w));
  } else if (chunks > 1) {
    held.resize(static_cast<size_t>(num_stages() / chunks));
    for (int w = 0; w < static_cast<int>(held.size()); ++w)
      for (int c = 0; c < chunks; ++c)
        held[static_cast<size_t>(w)].push_back(
            partitioner::chunk_stage(k, w, c, static_cast<int>(held.size())));
  } else {
    for (int s = 0; s < num_stages(); ++s)
      for (int q = 0; q < stages_[static_cast<size_t>(s)].replicas; ++q) {
        held.push_back({s});
        replica_of.push_back(q);
      }
  }
  replica_of.resize(held.size(), 0);
  const int total = static_cast<int>(held.size());
  total_workers_ = total;
  if (options_.comm) {
    if (options_.comm->size() != total)
      throw PlanError("the plan runs " + std::to_string(total) + " workers but the MPI job has " +
                      std::to_string(options_.comm->size()) + " ranks (start it with mpirun -np " +
                      std::to_string(total) + ")");
  } else {
    // Workers that each have cores of their own poll before they sleep.
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const bool own_cores = total * options_.threads_per_worker <= cores;
    comms_ = make_local_communicators(total, options_.queue_bytes, recv_spin(own_cores));
    core_groups_ = pinned_core_groups(options_.pin_workers, total, options_.threads_per_worker);
  }
  set_cpu_threads(options_.threads_per_worker);
  const bool split = from_file ? options_.schedule_file->split_backward
                               : partitioner::splits_backward(options_.schedule);
  for (int w = 0; w < total; ++w) {
    if (options_.comm && options_.comm->rank() != w) continue;  // another process's
    const int s = held[static_cast<size_t>(w)].front(), q = replica_of[static_cast<size_t>(w)];
    auto worker = std::make_unique<Worker>();
    worker->index = w;
    worker->stage = s;
    worker->replica = q;
    worker->backend = options_.make_backend ? options_.make_backend(w) : make_cpu_backend();
    for (const int stage : held[static_cast<size_t>(w)]) {
      const size_t vs = static_cast<size_t>(stage);
      // A whole-minibatch stage's params come from `tg` too (by name: the
      // same model, a checkpoint restored there).
      worker->sws[static_cast<int>(vs)] = std::make_unique<StageWorker>(
          whole_[vs] ? whole_programs_[vs] : programs_[vs], tg, *worker->backend,
          options_.optimizer,
          // (options_.schedule: a BatchNorm stage on the whole minibatch runs zb-h1 as gpipe.)
          /*split_backward=*/split || (!batched_.empty() && batched_[vs]),
          options_.recompute || stages_[vs].recompute,
          // Only pipedream's replicas update a round after the next one's backward.
          /*overlapping_rounds=*/options_.schedule == ScheduleKind::kPipeDream &&
              stages_[vs].replicas > 1,
          !batched_.empty() && batched_[vs] ? &step_programs_[vs] : nullptr);
    }
    worker->comm = options_.comm ? options_.comm : comms_[static_cast<size_t>(w)].get();
    if (!core_groups_.empty()) worker->cores = core_groups_[static_cast<size_t>(w)];
    worker->stats.stage = s;
    worker->stats.replica = q;
    workers_.push_back(std::move(worker));
  }
  for (auto& w : workers_) w->thread = std::thread([this, p = w.get()] { worker_main(*p); });
}

void Pipeline::plan_whole_minibatch_stages(const std::vector<std::pair<int, int>>& ranges) {
  // Without a BatchNorm every stage already runs as one worker would.
  if (std::none_of(programs_.begin(), programs_.end(),
                   [](const StageProgram& p) { return has_batch_statistics(p.forward); }))
    return;
  const ScheduleKind k = options_.schedule;
  if (k == ScheduleKind::kTwoBW || k == ScheduleKind::kFromFile ||
      partitioner::chunks_per_worker(k, options_.chunks) > 1)
    throw PlanError(std::string("--bn-stats minibatch runs with gpipe, 1f1b-flush and zb-h1 (a "
                                "BatchNorm stage takes every microbatch of a step at once), not ") +
                    partitioner::schedule_name(k));
  whole_programs_ = build_stage_programs(*options_.minibatch_graph, ranges);
  for (size_t s = 0; s < programs_.size(); ++s) {
    if (!has_batch_statistics(programs_[s].forward)) continue;
    const std::string where = "--bn-stats minibatch: stage " + std::to_string(s) +
                              " (BatchNorm) runs every microbatch of a step at once, so it ";
    if (stages_[s].replicas != 1) throw PlanError(where + "cannot be replicated");
    if (options_.recompute || stages_[s].recompute)
      throw PlanError(where + "keeps its activations (drop --recompute)");
    check_same_transfers(programs_[s], whole_programs_[s]);
    whole_[s] = true;
  }
  // Such a stage waits for a step's last forward before its first result;
  // 1F1B orders would wait on a backward first.
  if (std::count(whole_.begin(), whole_.end(), true) > 0) options_.schedule = ScheduleKind::kGPipe;
}

void Pipeline::plan_batched_weights(const std::vector<std::pair<int, int>>& ranges) {
  const WeightGradients want = options_.weight_gradients;
  if (want == WeightGradients::kPerMicrobatch) return;
  const ScheduleKind k = options_.schedule;
  std::vector<bool> chosen = options_.batched_stages;
  if (chosen.empty()) chosen.assign(stages_.size(), true);
  if (std::find(chosen.begin(), chosen.end(), true) == chosen.end()) return;  // none chosen
  std::string why;
  if (chosen.size() != stages_.size())
    why = std::to_string(chosen.size()) + " stage flags for " + std::to_string(stages_.size()) +
          " stages";
  else if (k != ScheduleKind::kGPipe && k != ScheduleKind::kOneFOneB)
    why = std::string("they run with gpipe and 1f1b, not ") + partitioner::schedule_name(k);
  else if (options_.microbatches < 2)
    why = "a step of one microbatch has nothing to batch";
  else if (!options_.step_graph)
    why = "no training graph at the minibatch size was given";
  else if (options_.recompute)
    why = "stages that recompute their activations keep only their inputs";
  else if (std::count(whole_.begin(), whole_.end(), true) > 0)
    why = "--bn-stats minibatch runs BatchNorm stages on the whole minibatch already";
  if (!why.empty()) {
    if (want == WeightGradients::kBatched)
      throw PlanError("batched weight gradients cannot run: " + why);
    weight_note_ = "weight gradients per microbatch: " + why;
    return;
  }
  // Per stage: under kAuto a stage that cannot batch keeps per-microbatch
  // weight gradients, the others batch.
  step_programs_ = build_stage_programs(*options_.step_graph, ranges);
  for (size_t s = 0; s < stages_.size(); ++s) {
    if (!chosen[s]) continue;
    std::string stage_why;
    if (stages_[s].replicas != 1)
      stage_why =
          "stage " + std::to_string(s) + " is replicated (a replica holds a share of the step)";
    else if (stages_[s].recompute)
      stage_why = "stage " + std::to_string(s) + " recomputes its activations";
    else
      try {
        check_same_transfers(programs_[s], step_programs_[s]);
        StageProgram micro = programs_[s], whole = step_programs_[s];
        split_backward(micro);
        split_backward(whole);
        check_batched_weights(micro, whole);
      } catch (const PlanError& e) {
        stage_why = e.what();
      }
    if (stage_why.empty()) continue;
    if (want == WeightGradients::kBatched)
      throw PlanError("batched weight gradients cannot run: " + stage_why);
    chosen[s] = false;
    weight_note_ +=
        (weight_note_.empty() ? "weight gradients per microbatch on " : "; ") + stage_why;
  }
  if (std::find(chosen.begin(), chosen.end(), true) != chosen.end())
    batched_ = chosen;
  else
    step_programs_.clear();
}

std::vector<int> Pipeline::whole_minibatch_stages() const {
  std::vector<int> out;
  for (size_t s = 0; s < whole_.size(); ++s)
    if (whole_[s]) out.push_back(static_cast<int>(s));
  return out;
}

Pipeline::~Pipeline() {
  for (auto& w : workers_) {
    std::lock_guard<std::mutex> lock(w->mu);
    w->quit = true;
    w->cv.notify_all();
  }
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
}

partitioner::Schedule Pipeline::build_round_schedule(int count) const {
  partitioner::ScheduleShape shape;
  const ScheduleKind k = options_.schedule;
  if (k == ScheduleKind::kFromFile) return *options_.schedule_file;  // validated when loaded
  for (const auto& st : stages_) shape.replicas.push_back(st.replicas);
  if (partitioner::chunks_per_worker(k, options_.chunks) > 1) {
    shape.replicas.assign(static_cast<size_t>(total_workers_), 1);  // workers, not chunks
    shape.chunks = options_.chunks;
  }
  if (k == ScheduleKind::kTwoBW) {
    if (count % options_.microbatches != 0)
      throw PlanError("2bw runs whole steps: " + std::to_string(count) +
                      " microbatches is not a multiple of " +
                      std::to_string(options_.microbatches));
    shape.microbatches = options_.microbatches;
    shape.steps = count / options_.microbatches;
    shape.overlap_allreduce = false;  // W(t+1) = W(t) - lr grad f(W(t-1)) with replicas too
  } else {
    shape.microbatches = count;
  }
  if (k == ScheduleKind::kPipeDream)
    for (const auto& st : stages_)
      if (count % st.replicas != 0)
        throw PlanError(
            "pipedream rounds must give every replica the same number of minibatches: " +
            std::to_string(count) + " minibatches over " + std::to_string(st.replicas) +
            " replicas");
  shape.batched_weights = batched_;
  partitioner::Schedule s = partitioner::build_schedule(k, shape);
  partitioner::validate(s);
  return s;
}

RoundResult Pipeline::run(const std::vector<TensorMap>& microbatches) {
  if (failed_) throw RuntimeFault("the pipeline stopped after an earlier failure");
  if (microbatches.empty()) return {};
  const int count = static_cast<int>(microbatches.size());
  if (partitioner::flush_schedule(options_.schedule) && count != options_.microbatches)
    throw PlanError("a flush step takes " + std::to_string(options_.microbatches) +
                    " microbatches, not " + std::to_string(count));
  if (schedule_.num_microbatches != count || schedule_.programs.empty()) {
    schedule_ = build_round_schedule(count);
    versions_ = plan_versions(schedule_, version_rule(options_), options_.microbatches);
  }
  feeds_ = &microbatches;
  if (!loss_weight_.empty() && !microbatches[0].count(loss_weight_)) {
    // Callers that do not weigh microbatches (pipeline_fit does) get equal weights.
    weighted_ = microbatches;
    for (auto& feeds : weighted_) feeds[loss_weight_] = ir::Tensor::scalar_f32(1.0f);
    feeds_ = &weighted_;
  }
  round_start_ = Clock::now();
  for (auto& w : workers_) {
    std::lock_guard<std::mutex> lock(w->mu);
    w->losses.clear();
    w->grad_sq.clear();
    w->ops.clear();
    w->busy_s = 0;
    ++w->posted;
    w->cv.notify_all();
  }
  for (auto& w : workers_) {
    std::unique_lock<std::mutex> lock(w->mu);
    w->cv.wait(lock, [&] { return w->finished == w->posted; });
  }
  RoundResult r;
  r.seconds = seconds_since(round_start_);
  round_base_ += count;
  feeds_ = nullptr;
  // The root cause: the first error that is not a consequence of another
  // worker's abort.
  Worker* culprit = nullptr;
  bool culprit_primary = false;
  for (auto& w : workers_) {
    if (!w->error) continue;
    bool primary = true;
    try {
      std::rethrow_exception(w->error);
    } catch (const std::exception& e) {
      primary = std::string(e.what()).find("communicator aborted") == std::string::npos;
    } catch (...) {
    }
    if (!culprit || (primary && !culprit_primary)) {
      culprit = w.get();
      culprit_primary = primary;
    }
  }
  if (culprit) {
    failed_ = true;
    const std::string where = "worker " + std::to_string(culprit->index) + " (stage " +
                              std::to_string(culprit->stage) + ")";
    try {
      std::rethrow_exception(culprit->error);
    } catch (const RuntimeFault& e) {
      // Another process's failure already names its worker and stage.
      if (!culprit_primary && options_.comm) throw;
      throw RuntimeFault(where + ": " + e.what());
    } catch (const ModelError& e) {
      throw ModelError(where + ": " + e.what());
    } catch (const std::exception& e) {
      throw RuntimeFault(where + ": " + e.what());
    } catch (...) {
      throw RuntimeFault(where + ": unknown error");
    }
  }
  std::vector<WorkerReport> reports;
  for (auto& w : workers_)
    reports.push_back({w->index, w->losses, w->grad_sq, w->ops, w->busy_s, w->stats});
  if (options_.comm) {
    try {
      reports = gather_reports(*options_.comm, round_base_, std::move(reports));
    } catch (...) {
      failed_ = true;
      throw;
    }
    std::sort(reports.begin(), reports.end(),
              [](const WorkerReport& a, const WorkerReport& b) { return a.worker < b.worker; });
    if (is_root()) {
      all_stats_.clear();
      for (const auto& rep : reports) all_stats_.push_back(rep.stats);
    }
  }
  // Losses in microbatch order, grouped per update.
  std::vector<std::pair<int64_t, double>> all;
  for (const auto& rep : reports) all.insert(all.end(), rep.losses.begin(), rep.losses.end());
  std::sort(all.begin(), all.end());
  const int per = options_.schedule == ScheduleKind::kPipeDream ? 1 : options_.microbatches;
  for (size_t i = 0; i < all.size(); i += static_cast<size_t>(per)) {
    double sum = 0;
    for (size_t j = i; j < i + static_cast<size_t>(per) && j < all.size(); ++j)
      sum += all[j].second;
    r.losses.push_back(sum / per);
  }
  r.grad_norms = global_grad_norms(reports);
  for (const auto& rep : reports) {
    r.ops.insert(r.ops.end(), rep.ops.begin(), rep.ops.end());
    r.busy_s.push_back(rep.busy_s);
  }
  return r;
}

void Pipeline::worker_main(Worker& w) {
  // Before any kernel: the OpenMP team this thread forks inherits the mask.
  if (!pin_calling_thread(w.cores)) w.cores.clear();
  int64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(w.mu);
      w.cv.wait(lock, [&] { return w.quit || w.posted > seen; });
      if (w.quit) return;
      seen = w.posted;
    }
    std::exception_ptr error;
    try {
      run_program(w);
    } catch (...) {
      error = std::current_exception();
      failed_ = true;
      std::string why = "unknown error";
      try {
        throw;
      } catch (const std::exception& e) {
        why = e.what();
      }
      w.comm->abort("worker " + std::to_string(w.index) + " (stage " + std::to_string(w.stage) +
                    "): " + why);
    }
    std::lock_guard<std::mutex> lock(w.mu);
    w.error = error;
    w.finished = seen;
    w.cv.notify_all();
  }
}

// Per update of the round, in order: the square root of the stages' squared
// norms, each stage counted once (its lowest replica that took the update:
// replicas that allreduced hold the same gradients).
std::vector<double> Pipeline::global_grad_norms(const std::vector<WorkerReport>& reports) {
  std::map<std::pair<int64_t, int>, std::pair<int, double>> per_stage;  // (update, stage)
  for (const auto& rep : reports)
    for (const GradSquares& g : rep.grad_sq) {
      auto [it, fresh] = per_stage.try_emplace({g.update, g.stage}, g.replica, g.sum_sq);
      if (!fresh && g.replica < it->second.first) it->second = {g.replica, g.sum_sq};
    }
  std::map<int64_t, double> per_update;
  for (const auto& [key, value] : per_stage) per_update[key.first] += value.second;
  std::vector<double> norms;
  for (const auto& [update, sum_sq] : per_update) norms.push_back(std::sqrt(sum_sq));
  return norms;
}

// The squared norm of one stage's sealed gradients as its update scales
// them, tied params counted on the lowest stage holding them only.
double Pipeline::stage_grad_squares(const StageWorker& one, int stage, int64_t round,
                                    double scale) const {
  std::set<std::string> skip;
  for (const auto& [param, sharing] : programs_[static_cast<size_t>(stage)].shared)
    if (*std::min_element(sharing.begin(), sharing.end()) != stage) skip.insert(param);
  return scale * scale * one.sealed_sum_of_squares(round, skip);
}

// Each tied param once per worker of several chunks, in name order on every worker:
// the partials of its own copies summed into the first, that sum summed over the
// other workers holding copies, and the total copied back into its other copies.
void Pipeline::tie_chunks(Worker& w, int64_t round) {
  std::map<std::string, std::vector<int>> mine, sharing_of;  // param -> stages
  for (const auto& [stage, one] : w.sws)
    for (const auto& [param, sharing] : programs_[static_cast<size_t>(stage)].shared) {
      mine[param].push_back(stage);
      sharing_of[param] = sharing;
    }
  for (const auto& [param, stages] : mine) {
    ir::Tensor* sum = w.sws.at(stages.front())->sealed_gradient(round, param);
    auto values = [&, name = param](ir::Tensor* t) {  // (clang 14 captures no bindings)
      if (t->dtype() != ir::DType::kF32)
        throw RuntimeFault("the gradient of tied param '" + name + "' is not float32");
      return t->data<float>();
    };
    for (size_t i = 1; i < stages.size(); ++i) {
      const float* part = values(w.sws.at(stages[i])->sealed_gradient(round, param));
      float* out = values(sum);
      for (int64_t k = 0; k < sum->numel(); ++k) out[k] += part[k];
    }
    std::set<int> workers;
    for (int s : sharing_of[param])
      workers.insert(schedule_.stage_workers[static_cast<size_t>(s)].front());
    if (workers.size() > 1) w.comm->allreduce_sum({workers.begin(), workers.end()}, {sum});
    for (size_t i = 1; i < stages.size(); ++i)
      *w.sws.at(stages[i])->sealed_gradient(round, param) = sum->clone();
  }
}

namespace {
MessageTag norm_tag(int64_t round_base, int64_t update) {
  return {"grad_norm/" + std::to_string(update), round_base, MessageTag::kCollective};
}
}  // namespace

// The params whose squared gradients worker `r` contributes to the global norm: those
// of the stages it holds as first replica (replicas that allreduced hold the same
// gradients), a tied param on the lowest stage holding it only. By (stage, name).
std::vector<std::pair<int, std::string>> Pipeline::norm_params(int r) const {
  std::vector<std::pair<int, std::string>> out;
  for (size_t s = 0; s < programs_.size(); ++s) {
    if (schedule_.stage_workers[s].front() != r) continue;
    const StageProgram& prog = programs_[s];
    for (const auto& [param, grad] : prog.grads) {
      auto tied = prog.shared.find(param);
      if (tied == prog.shared.end() ||
          *std::min_element(tied->second.begin(), tied->second.end()) == static_cast<int>(s))
        out.emplace_back(static_cast<int>(s), param);
    }
  }
  return out;
}

// The global gradient norm of one update: each worker sends every other its params'
// squared gradient norms (norm_params), and every worker sums all of them in param name
// order. The norm, and with it the clipped weights, is then the same bits whichever
// way the model is cut into stages (the cut follows the measured profile, which varies
// between runs). Sending, not an allreduce, lets a worker update before the others'
// parts are in (post-validation).
void Pipeline::send_norm_part(Worker& w, int64_t update, double scale) {
  w.norm_parts.clear();
  std::vector<int64_t> bits;  // doubles travel as their bits: no rounding on the way
  for (const auto& [stage, param] : norm_params(w.index)) {
    const double sq =
        scale * scale * sum_of_squares(*w.sws.at(stage)->sealed_gradient(update, param));
    w.norm_parts.push_back(sq);
    bits.push_back(std::bit_cast<int64_t>(sq));
  }
  w.norm_update = update;
  bits.push_back(static_cast<int64_t>(w.norm_parts.size()));  // never an empty message
  for (int r = 0; r < total_workers_; ++r)
    if (r != w.index)
      w.comm->send(r, norm_tag(round_base_, update),
                   ir::Tensor::from_i64(bits, {static_cast<int64_t>(bits.size())}));
}

bool Pipeline::norm_parts_here(Worker& w, int64_t update) {
  for (int r = 0; r < total_workers_; ++r)
    if (r != w.index && !w.comm->has_message(r, norm_tag(round_base_, update))) return false;
  return true;
}

double Pipeline::global_grad_norm(Worker& w, int64_t update) {
  std::map<std::string, double> squares;
  for (int r = 0; r < total_workers_; ++r) {
    const auto names = norm_params(r);
    std::vector<double> parts = w.norm_parts;
    if (r != w.index) {
      const ir::Tensor t = w.comm->recv(r, norm_tag(round_base_, update));
      const int64_t n = t.numel() - 1;
      if (n != static_cast<int64_t>(names.size()) || t.data<int64_t>()[n] != n)
        throw RuntimeFault(
            fmt::format("worker {}: worker {} sent {} parts of the gradient "
                        "norm of update {}, expected {}",
                        w.index, r, n, update, names.size()));
      parts.clear();
      for (int64_t i = 0; i < n; ++i) parts.push_back(std::bit_cast<double>(t.data<int64_t>()[i]));
    }
    for (size_t i = 0; i < names.size(); ++i) squares[names[i].second] = parts[i];
  }
  double sum = 0;
  for (const auto& [param, sq] : squares) sum += sq;
  return std::sqrt(sum);
}

void Pipeline::run_program(Worker& w) {
  const auto& prog = schedule_.programs[static_cast<size_t>(w.index)];
  const WorkerVersions& ver = versions_[static_cast<size_t>(w.index)];
  const int64_t base_version = w.sws.begin()->second->version();
  const int replicas = stages_[static_cast<size_t>(w.stage)].replicas;
  // Activations stashed over all of this worker's stages.
  auto track_stash = [&] {
    size_t bytes = 0, peak = 0;
    int in_flight = 0;
    for (const auto& [s, one] : w.sws) {
      bytes += one->stash_bytes();
      peak = std::max(peak, one->peak_stash_bytes());
      in_flight += one->in_flight();
    }
    w.stats.peak_stash_bytes = std::max({w.stats.peak_stash_bytes, bytes, peak});
    w.stats.peak_in_flight = std::max(w.stats.peak_in_flight, in_flight);
  };
  // What else the worker holds (optimizer state exists after the first update).
  auto track_state = [&] {
    size_t params = 0, grads = 0, optimizer = 0;
    for (const auto& [s, one] : w.sws) {
      params += one->param_bytes();
      grads += one->gradient_bytes();
      optimizer += one->optimizer_bytes();
    }
    w.stats.param_bytes = params;
    w.stats.peak_gradient_bytes = std::max(w.stats.peak_gradient_bytes, grads);
    w.stats.optimizer_bytes = std::max(w.stats.optimizer_bytes, optimizer);
  };
  auto worker_of = [&](int stage, int mb) {
    const auto& ws = schedule_.stage_workers[static_cast<size_t>(stage)];
    return ws[static_cast<size_t>(mb) % ws.size()];
  };
  auto absolute = [&](int64_t v) { return v == kNoFutureVersion ? v : base_version + v; };
  const ScheduleKind kind = options_.schedule;
  const bool delayed_ties = partitioner::tied_gradients_delayed(kind, options_.clip_norm > 0);
  // A whole-minibatch stage (--bn-stats minibatch) computes the loss over the
  // minibatch, not one microbatch's: its gradients are the step's already.
  const bool whole = whole_[static_cast<size_t>(w.stage)];
  const auto& own_results = programs_[static_cast<size_t>(w.stage)].results;
  const bool whole_loss =
      whole && std::find(own_results.begin(), own_results.end(), loss_) != own_results.end();
  const int m = options_.microbatches;
  const double scale = whole_loss                         ? 1.0
                       : kind == ScheduleKind::kPipeDream ? 1.0 / replicas
                                                          : 1.0 / m;
  // --clip-norm: a flush schedule's updates may go ahead of the norm (post-validation).
  using UpdateCheck = PipelineOptions::UpdateCheck;
  const bool post_validate = options_.clip_norm > 0 && partitioner::flush_schedule(kind) &&
                             options_.update_check != UpdateCheck::kBarrier;
  auto take_norm = [&] {
    const double norm = global_grad_norm(w, w.norm_update);
    w.clip_coef = std::min(1.0, options_.clip_norm / (norm + 1e-6));  // as clip_grad_norm
    w.norm_pending = false;
  };
  w.inbox_fwd.clear();
  w.inbox_bwd.clear();
  w.to_self.clear();
  w.outbox_fwd.clear();
  w.outbox_bwd.clear();
  w.gathered_fwd.clear();
  w.gathered_bwd.clear();
  w.deferred_sends.clear();
  auto send = [&](const partitioner::ScheduleOp& op) {
    const bool fwd = op.payload == Payload::kActivation;
    const std::pair<int, int> key{op.stage, op.microbatch};
    const StageProgram& sp = programs_[static_cast<size_t>(op.stage)];
    auto& box = fwd ? w.outbox_fwd : w.outbox_bwd;
    for (const auto& tr : fwd ? sp.send_fwd : sp.send_bwd) {
      const int to = worker_of(tr.to_stage, op.microbatch);
      const int64_t id = round_base_ + op.microbatch;
      if (to == w.index)
        w.to_self[{tr.tensor, id, fwd}] = box[key].at(tr.tensor);
      else
        w.comm->send(to, {tr.tensor, id, fwd ? MessageTag::kForward : MessageTag::kBackward},
                     box[key].at(tr.tensor));
    }
    box.erase(key);
  };
  // A whole-minibatch stage's results, cut into its microbatches' outboxes;
  // then the sends that waited for them.
  auto deliver = [&](const TensorMap& results, bool fwd, double part_scale) {
    const StageProgram& sp = programs_[static_cast<size_t>(w.stage)];
    const ir::Graph& micro = fwd ? sp.forward : sp.backward;
    auto& box = fwd ? w.outbox_fwd : w.outbox_bwd;
    for (const auto& [name, t] : results) {
      auto parts = cut_minibatch(name, t, micro.tensor(name).shape, m, part_scale);
      for (int j = 0; j < m; ++j)
        box[{w.stage, j}][name] = std::move(parts[static_cast<size_t>(j)]);
    }
    for (size_t d : w.deferred_sends) send(prog[d]);
    w.deferred_sends.clear();
  };
  auto gathered = [&](std::map<int, TensorMap>& by_mb) {
    std::vector<TensorMap> parts;
    for (auto& [mb, feeds] : by_mb) parts.push_back(std::move(feeds));
    by_mb.clear();
    return parts;
  };

  for (size_t i = 0; i < prog.size(); ++i) {
    if (failed_) throw RuntimeFault("communicator aborted: another worker failed");
    const auto& op = prog[i];
    const int64_t gmb = round_base_ + op.microbatch;  // unique over the run
    // The stage this op computes on; Recv: the receiving one (op.stage
    // names the producer).
    const bool activation = op.payload == Payload::kActivation;
    const int at = op.kind != OpKind::kRecv ? op.stage : op.stage + (activation ? 1 : -1);
    const StageProgram& sp = programs_[static_cast<size_t>(at)];
    StageWorker* owner =
        op.kind == OpKind::kSend || op.kind == OpKind::kRecv ? nullptr : w.sws.at(op.stage).get();
    const std::pair<int, int> key{at, op.microbatch};
    const double start = seconds_since(round_start_);
    switch (op.kind) {
      case OpKind::kForward: {
        TensorMap feeds = (*feeds_)[static_cast<size_t>(op.microbatch)];
        for (auto& [name, t] : w.inbox_fwd[key]) feeds[name] = t;
        w.inbox_fwd.erase(key);
        if (whole) {  // the step's microbatches at once, as microbatch 0 of the round
          w.gathered_fwd[op.microbatch] = std::move(feeds);
          if (static_cast<int>(w.gathered_fwd.size()) < m) break;
          StageForwardResult r =
              owner->forward(round_base_, absolute(ver.forward_version[i]),
                             join_microbatches(gathered(w.gathered_fwd), owner->program().forward),
                             options_.seed + uint64_t(round_base_));
          if (auto it = r.results.find(loss_); it != r.results.end())
            for (int j = 0; j < m; ++j)  // the minibatch's mean: each microbatch's share
              w.losses.emplace_back(j, it->second.at(0));
          deliver(r.send, /*fwd=*/true, 1.0);
          track_stash();
          break;
        }
        StageForwardResult r = owner->forward(gmb, absolute(ver.forward_version[i]), feeds,
                                              options_.seed + uint64_t(gmb));
        if (auto it = r.results.find(loss_); it != r.results.end()) {
          const double loss = it->second.at(0);
          if (!std::isfinite(loss))
            throw RuntimeFault("step " + std::to_string(owner->version()) + ", microbatch " +
                               std::to_string(gmb) + ": the loss is " +
                               (std::isnan(loss) ? "NaN"
                                : loss > 0       ? "Inf"
                                                 : "-Inf"));
          w.losses.emplace_back(op.microbatch, loss);
        }
        w.outbox_fwd[key] = std::move(r.send);
        track_stash();
        break;
      }
      case OpKind::kBackward:
      case OpKind::kBackwardInput: {  // whole, or its input half (zb-h1)
        TensorMap feeds = (*feeds_)[static_cast<size_t>(op.microbatch)];
        for (auto& [name, t] : w.inbox_bwd[key]) feeds[name] = t;
        w.inbox_bwd.erase(key);
        if (whole) {
          w.gathered_bwd[op.microbatch] = std::move(feeds);
          if (static_cast<int>(w.gathered_bwd.size()) < m) break;
          TensorMap grads = owner->backward(
              round_base_, join_microbatches(gathered(w.gathered_bwd), owner->program().backward));
          // Upstream stages take per-microbatch gradients of per-microbatch
          // means: m times the minibatch mean's, when this stage took that.
          deliver(grads, /*fwd=*/false, whole_loss ? double(m) : 1.0);
          track_stash();
          break;
        }
        w.outbox_bwd[key] = op.kind == OpKind::kBackward ? owner->backward(gmb, feeds)
                                                         : owner->backward_input(gmb, feeds);
        track_stash();
        break;
      }
      case OpKind::kSend: {
        const auto& box = op.payload == Payload::kActivation ? w.outbox_fwd : w.outbox_bwd;
        if (whole && !box.count(key))
          w.deferred_sends.push_back(i);  // the whole minibatch has not run yet
        else
          send(op);
        break;
      }
      case OpKind::kRecv: {
        const bool fwd = op.payload == Payload::kActivation;
        auto& box = fwd ? w.inbox_fwd : w.inbox_bwd;
        for (const auto& tr : fwd ? sp.recv_fwd : sp.recv_bwd) {
          const int from = worker_of(tr.from_stage, op.microbatch);
          if (from != w.index) {
            box[key][tr.tensor] = w.comm->recv(
                from, {tr.tensor, gmb, fwd ? MessageTag::kForward : MessageTag::kBackward});
            continue;
          }
          auto it = w.to_self.find({tr.tensor, gmb, fwd});
          if (it == w.to_self.end())  // the schedule receives before its own chunk sent
            throw RuntimeFault("worker " + std::to_string(w.index) + " receives '" + tr.tensor +
                               "' of microbatch " + std::to_string(gmb) + " from its own stage " +
                               std::to_string(tr.from_stage) + " before that stage sent it");
          box[key][tr.tensor] = std::move(it->second);
          w.to_self.erase(it);
        }
        break;
      }
      case OpKind::kAllreduce:
        owner->seal_gradients(op.microbatch);
        w.comm->allreduce_sum(schedule_.stage_workers[static_cast<size_t>(op.stage)],
                              owner->gradient_set(op.microbatch));
        break;
      case OpKind::kStep: {
        // Seals a stage's gradients and sums its tied params' partial
        // gradients with the other stages holding a copy (in name order on
        // every worker), so every copy takes the same update: the same
        // minibatch's partials in one allreduce per param, or under
        // asynchronous 1F1B delayed ones that need no wait.
        // A worker of several chunks seals them all first and sums each tied param
        // once (tie_chunks), as its copies may sit on two of its own chunks.
        const bool every_chunk = w.sws.size() > 1;
        auto prepare = [&](int stage, StageWorker& one) {
          const StageProgram& prog_s = programs_[static_cast<size_t>(stage)];
          one.seal_gradients(op.microbatch);
          for (const auto& [param, sharing] :
               every_chunk ? decltype(prog_s.shared){} : prog_s.shared) {
            if (delayed_ties) {
              w.ties.exchange(
                  *w.comm, [&](int s) { return worker_of(s, 0); }, stage, param, sharing,
                  op.microbatch, static_cast<int>(feeds_->size()), round_base_,
                  *one.sealed_gradient(op.microbatch, param));
              continue;
            }
            std::vector<int> group;
            for (int s : sharing) group.push_back(worker_of(s, 0));
            w.comm->allreduce_sum(group, {one.sealed_gradient(op.microbatch, param)});
          }
        };
        auto check_finite = [&](int stage, StageWorker& one) {
          if (!one.gradients_finite(op.microbatch))
            throw RuntimeFault("step " + std::to_string(one.version()) + ", stage " +
                               std::to_string(stage) + ": a gradient is not finite");
        };
        // Several chunks here (interleaved, a V): the round's first update prepares
        // every chunk, and takes the global norm for clipping once; the later
        // updates reuse both.
        if (!every_chunk || w.prepared_round != round_base_) {
          for (auto& [s, one] : w.sws)
            if (every_chunk || s == op.stage) prepare(s, *one);
          if (every_chunk) tie_chunks(w, op.microbatch);
          for (auto& [s, one] : w.sws)
            if (every_chunk || s == op.stage) check_finite(s, *one);
          if (options_.clip_norm > 0) {
            send_norm_part(w, op.microbatch, scale);
            w.norm_pending = post_validate;
            if (!post_validate || (options_.update_check == UpdateCheck::kPostValidate &&
                                   norm_parts_here(w, op.microbatch)))
              take_norm();
          }
          w.prepared_round = round_base_;
        }
        // metrics.jsonl's grad_norm (before clipping): summed over the stages after the round.
        w.grad_sq.push_back({op.stage, w.replica, op.microbatch,
                             stage_grad_squares(*owner, op.stage, op.microbatch, scale)});
        const bool keep_old = owner->version_in_use(owner->version()) ||
                              absolute(ver.min_future[i + 1]) <= owner->version();
        track_state();  // the round's sealed gradients, before the update drops them
        const double lr = options_.lr_schedule.lr_at(owner->version(), options_.optimizer.lr);
        if (w.norm_pending && !keep_old) {
          owner->provisional_step(op.microbatch, scale, lr);
          w.provisional.push_back(owner);
          ++w.stats.provisional_updates;
          size_t kept = 0;
          for (const auto& [s, one] : w.sws) kept += one->before_update_bytes();
          w.stats.before_update_bytes = std::max(w.stats.before_update_bytes, kept);
        } else {
          if (w.norm_pending) take_norm();
          owner->step(op.microbatch, options_.clip_norm > 0 ? scale * w.clip_coef : scale, lr,
                      keep_old);
        }
        owner->release_versions(absolute(ver.min_future[i + 1]));
        w.stats.peak_weight_versions =
            std::max(w.stats.peak_weight_versions, owner->versions_alive());
        track_state();
        break;
      }
      case OpKind::kBackwardWeight:
        if (op.microbatch == partitioner::kWholeStep) {  // the step's microbatches at once
          std::map<int64_t, TensorMap> feeds;
          for (size_t j = 0; j < feeds_->size(); ++j)
            feeds[round_base_ + static_cast<int64_t>(j)] = (*feeds_)[j];
          owner->backward_weight_step(feeds);
        } else {
          owner->backward_weight(gmb, (*feeds_)[static_cast<size_t>(op.microbatch)]);
        }
        break;
    }
    const double end = seconds_since(round_start_);
    if (op.kind == OpKind::kForward || op.kind == OpKind::kBackward ||
        op.kind == OpKind::kBackwardInput || op.kind == OpKind::kBackwardWeight)
      w.busy_s += end - start;
    if (op.kind != OpKind::kSend) w.ops.push_back({w.index, op, start, end});
  }
  // Post-validation: the norm, now that this worker has nothing left to do, and the
  // provisional updates kept, or redone when the norm clips.
  if (w.norm_pending) take_norm();
  for (StageWorker* one : w.provisional) w.stats.redone_updates += one->settle(scale * w.clip_coef);
  w.provisional.clear();
  w.stats.ledger = w.backend->transfers();
  if (++w.stats.rounds == 2) w.stats.ledger_warm = w.stats.ledger;
}

void Pipeline::write_back(ir::Graph& g, int replica) {
  std::vector<StateValue> mine;
  for (const auto& w : workers_) {
    const int replicas = stages_[static_cast<size_t>(w->stage)].replicas;
    if (w->replica != (replica < replicas ? replica : 0)) continue;
    for (const auto& [s, one] : w->sws) {
      if (is_root()) {
        one->write_back(g);
      } else {
        for (auto v : one->state_values()) {
          v.value = v.value.clone();  // the next step may reuse the buffers
          mine.push_back(std::move(v));
        }
      }
    }
  }
  if (!options_.comm) return;
  for (auto& v : gather_state(*options_.comm, collectives_++, mine))
    put_value(g, v.name, v.value, v.role);
}

bool Pipeline::any_rank(bool flag) {
  if (!options_.comm) return flag;
  ++collectives_;
  return exec::any_rank(*options_.comm, flag);
}

std::vector<WorkerStats> Pipeline::stats() const {
  if (options_.comm && is_root()) return all_stats_;
  std::vector<WorkerStats> out;
  for (const auto& w : workers_) out.push_back(w->stats);
  return out;
}

int64_t Pipeline::updates() const {
  return workers_.empty() ? 0 : workers_[0]->sws.begin()->second->version();
}

}  // namespace pipetrain::exec
