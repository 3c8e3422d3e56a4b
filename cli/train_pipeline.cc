// `pipetrain train model.onnx --stages 2 --schedule 1f1b ...`: the pipelined
// run. The plan comes from --plan, or from a profile measured here (--stages:
// a straight pipeline balanced by time; --workers: the DP partitioner, which
// may replicate stages). The same plan and profile feed the simulator, so the
// run ends with measured against predicted throughput and both timelines.
#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>

#include "autodiff/training_graph.h"
#include "cli/commands.h"
#include "cli/output_paths.h"
#include "cli/random_inputs.h"
#include "cli/schedule_auto.h"
#include "cli/stop_signals.h"
#include "cli/supervisor.h"
#include "cli/train_args.h"
#include "cli/train_data.h"
#include "cli/train_report.h"
#include "data/dataset.h"
#include "executor/backend.h"
#include "executor/comm/mpi_communicator.h"
#include "executor/comm/nccl_communicator.h"
#include "executor/measured_profile.h"
#include "executor/pipeline/job_topology.h"
#include "executor/pipeline/pipeline_fit.h"
#include "executor/pipeline/whole_minibatch.h"
#include "importer/checkpoint.h"
#include "importer/checkpoint_files.h"
#include "importer/importer.h"
#include "ir/error.h"
#include "partitioner/baselines.h"
#include "partitioner/dp.h"
#include "partitioner/plan.h"
#include "partitioner/schedule_file.h"
#include "partitioner/schedule_search.h"
#include "partitioner/simulator.h"

namespace pipetrain::cli {

namespace {

using partitioner::ScheduleKind;

// The train command's schedule names: PipeDream's asynchronous 1F1B is
// "1f1b" (as in the paper); the flushed variant is "1f1b-flush".
ScheduleKind train_schedule(const std::string& s) {
  if (s == "1f1b" || s == "pipedream") return ScheduleKind::kPipeDream;
  if (s == "1f1b-flush") return ScheduleKind::kOneFOneB;
  if (s == "gpipe") return ScheduleKind::kGPipe;
  if (s == "2bw") return ScheduleKind::kTwoBW;
  if (s == "zb-h1") return ScheduleKind::kZeroBubbleH1;
  if (s == "zb-h2") return ScheduleKind::kZeroBubbleH2;
  if (s == "interleaved") return ScheduleKind::kInterleaved;
  if (s == "zb-v") return ScheduleKind::kZeroBubbleV;
  if (s == "dualpipev") return ScheduleKind::kDualPipeV;
  if (s == "v-half") return ScheduleKind::kVHalf;
  if (partitioner::is_schedule_file(s)) return ScheduleKind::kFromFile;
  throw PlanError("unknown --schedule '" + s +
                  "' (train runs 1f1b, 1f1b-flush, gpipe, 2bw, zb-h1, zb-h2, zb-v, dualpipev, "
                  "v-half, "
                  "interleaved, auto, search, or a schedule file: .json or .csv)");
}

// Worker threads hand tensors over in one address space; a transfer costs
// about one copy at memory bandwidth.
partitioner::Topology local_topology(int workers) {
  return partitioner::parse_topology(std::to_string(workers), "10e9", "");
}

// The plan of `n` virtual stages (`what` says whose), straight and balanced by
// measured time.
partitioner::Plan virtual_plan(const partitioner::Profile& profile, int n,
                               const std::string& what) {
  partitioner::Plan plan = partitioner::time_balanced_plan(profile, local_topology(n));
  if (static_cast<int>(plan.stages.size()) != n)
    throw PlanError(what + " virtual stages but the model has only " +
                    std::to_string(profile.layers.size()) + " layers");
  return plan;
}

// Interleaved 1F1B's and ZB-V's plan: `stages` workers x `chunks` virtual stages.
partitioner::Plan virtual_stage_plan(const partitioner::Profile& profile, int stages, int chunks) {
  return virtual_plan(
      profile, stages * chunks,
      "--stages " + std::to_string(stages) + " x --chunks " + std::to_string(chunks));
}

// A chunked schedule's virtual stages: interleaved's time-balanced cut, or a V's cut
// that balances each worker's two chunks.
partitioner::Plan chunk_plan(const partitioner::Profile& profile, ScheduleKind kind, int stages,
                             int chunks) {
  if (!partitioner::v_shaped(kind)) return virtual_stage_plan(profile, stages, chunks);
  if (static_cast<int>(profile.layers.size()) < 2 * stages)
    throw PlanError(fmt::format("--stages {} x 2 virtual stages but the model has only {} layers",
                                stages, profile.layers.size()));
  return partitioner::v_balanced_plan(profile, local_topology(2 * stages));
}

// A schedule file's placement when it is not stage s on worker s: worker -> its stages.
std::vector<std::vector<int>> file_placement(const partitioner::Schedule& s) {
  std::vector<std::vector<int>> held(s.programs.size());
  bool identity = s.num_stages == static_cast<int>(s.programs.size());
  for (int st = 0; st < s.num_stages; ++st) {
    const int w = s.stage_workers[static_cast<size_t>(st)].front();
    held[static_cast<size_t>(w)].push_back(st);
    identity = identity && w == st;
  }
  return identity ? std::vector<std::vector<int>>{} : held;
}

// `links`: the workers' topology for --stages/--workers (threads: local_topology).
partitioner::Plan choose_plan(const TrainArgs& a, const partitioner::Profile& profile,
                              const partitioner::Topology& links) {
  partitioner::Plan plan;
  if (!a.plan_path.empty()) {
    plan = partitioner::load_plan(a.plan_path);
    partitioner::validate(plan, plan.topology);
    try {
      partitioner::check_against_profile(plan, profile);
    } catch (const PlanError& e) {
      throw PlanError(a.plan_path + ": " + e.what() +
                      " (import the model with the --layer-depth the plan was made with)");
    }
  } else if (a.stages > 0) {
    if (a.workers > 0 && a.workers != a.stages)
      throw PlanError("--stages " + std::to_string(a.stages) +
                      " is a straight pipeline on as many workers; give --workers alone for a "
                      "plan with replicated stages");
    plan = partitioner::time_balanced_plan(profile, links);
    if (static_cast<int>(plan.stages.size()) != a.stages)
      throw PlanError("--stages " + std::to_string(a.stages) + " but the model has only " +
                      std::to_string(profile.layers.size()) + " layers");
  } else {
    plan = partitioner::partition(profile, links);
  }
  return plan;
}

// The plan a checkpoint was written under, when this run asks for the same
// shape (--stages N as a straight N-stage pipeline, or --workers W) and the
// model still has its layers: asynchronous schedules' weights depend on where
// the stages are cut, so a resume (a restart above all) keeps the cut.
std::optional<partitioner::Plan> plan_to_keep(const TrainArgs& a,
                                              const std::optional<importer::Checkpoint>& c,
                                              const partitioner::Profile& profile) {
  if (!c || !a.plan_path.empty() || !c->meta.count("plan")) return std::nullopt;
  partitioner::Plan plan;
  try {
    plan = partitioner::plan_from_json(nlohmann::json::parse(c->meta.at("plan")));
    partitioner::check_against_profile(plan, profile);
  } catch (const std::exception&) {
    return std::nullopt;  // another model or layering: plan afresh
  }
  bool straight = true;
  for (const auto& st : plan.stages) straight = straight && st.replication == 1;
  const bool same = a.stages > 0 ? straight && static_cast<int>(plan.stages.size()) == a.stages
                                 : plan.workers_used() == a.workers;
  if (!same) return std::nullopt;
  return plan;
}

// Optimizer state bytes per param byte: momentum 1, Adam's moments 2 (3
// with amsgrad's maximum), plain SGD none.
double optimizer_state_per_param(const exec::OptimizerConfig& o) {
  if (o.kind == "adam" || o.kind == "adamw") return o.amsgrad ? 3.0 : 2.0;
  return o.momentum > 0 ? 1.0 : 0.0;
}

// ", on cores 0 | 1" (worker by worker, a worker's cores by commas) when
// the workers are pinned; nothing when they float.
std::string pinned_cores(const std::vector<std::vector<int>>& cores) {
  if (cores.empty()) return "";
  std::string out = ", on cores ";
  for (size_t w = 0; w < cores.size(); ++w) {
    if (w) out += " | ";
    for (size_t i = 0; i < cores[w].size(); ++i)
      out += (i ? "," : "") + std::to_string(cores[w][i]);
  }
  return out;
}

std::string stage_list(const partitioner::Plan& plan) {
  std::string s;
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const auto& st = plan.stages[i];
    s += fmt::format("\n  stage {}: layers {}-{} ({} .. {}), {} worker{}{}", i, st.first_layer,
                     st.last_layer, st.first_layer_name, st.last_layer_name, st.replication,
                     st.replication > 1 ? "s" : "",
                     st.recompute ? ", activations recomputed (the plan's choice)" : "");
  }
  return s;
}

// A measured round in the simulator's result format, for the timelines.
partitioner::SimResult as_sim_result(const exec::RoundResult& r, const std::string& name,
                                     int workers) {
  partitioner::SimResult s;
  s.schedule = name;
  s.makespan_s = r.seconds;
  s.run.makespan = r.seconds;
  s.run.ops = r.ops;
  s.run.busy_s = r.busy_s;
  double busy = 0;
  for (double b : r.busy_s) busy += b;
  s.bubble_fraction = r.seconds > 0 ? 1 - busy / (workers * r.seconds) : 0;
  for (int w = 0; w < workers; ++w) s.physical_workers.push_back(w);
  return s;
}

// Microbatches per step for flush schedules and 2bw: --microbatches when it
// splits --batch evenly (and, for 2bw, covers the stages); by default the
// smallest count of at least 2 per stage that does, else the largest valid one.
int microbatch_count(const TrainArgs& a, ScheduleKind kind, int stages) {
  const int64_t batch = a.model.batch;
  // 2bw: a microbatch per stage at least; interleaved: whole groups of one
  // per worker (`stages` counts the workers then).
  const bool interleaved = kind == ScheduleKind::kInterleaved;
  const int64_t least = kind == ScheduleKind::kTwoBW || interleaved ? stages : 1;
  std::vector<int64_t> valid;
  for (int64_t d = least; d <= batch; ++d)
    if (batch % d == 0 && (!interleaved || d % stages == 0)) valid.push_back(d);
  auto listed = [&] {
    std::string s;
    for (int64_t d : valid) s += (s.empty() ? "" : ", ") + std::to_string(d);
    return s.empty() ? std::string("none") : s;
  };
  if (a.microbatches > 0) {
    if (kind == ScheduleKind::kTwoBW && a.microbatches < stages)
      throw PlanError("--microbatches " + std::to_string(a.microbatches) + " with " +
                      std::to_string(stages) +
                      " stages: 2bw needs at least as many microbatches per step as stages "
                      "(counts that split --batch " +
                      std::to_string(batch) + ": " + listed() + ")");
    if (batch % a.microbatches != 0)
      throw ModelError("--batch " + std::to_string(batch) + " does not split into " +
                       std::to_string(a.microbatches) +
                       " equal microbatches (counts that do: " + listed() + ")");
    if (interleaved && a.microbatches % stages != 0)
      throw PlanError("--microbatches " + std::to_string(a.microbatches) +
                      ": interleaved 1F1B runs groups of one microbatch per worker (" +
                      std::to_string(stages) + "); counts that fit: " + listed());
    return a.microbatches;
  }
  if (valid.empty())
    throw ModelError("--batch " + std::to_string(batch) + " cannot feed 2bw over " +
                     std::to_string(stages) + " stages (it needs at least " +
                     std::to_string(stages) + " microbatches of one sample or more)");
  for (int64_t d : valid)
    if (d >= 2 * stages) return static_cast<int>(d);
  return static_cast<int>(valid.back());
}

// The ops of the first `k` microbatches (fill and early steady state), so a
// long round stays readable; busy time and makespan recomputed.
partitioner::SimResult first_microbatches(partitioner::SimResult r, int k) {
  std::vector<partitioner::TimedOp> kept;
  double end = 0;
  std::fill(r.run.busy_s.begin(), r.run.busy_s.end(), 0.0);
  for (const auto& t : r.run.ops) {
    if (t.op.microbatch >= k) continue;
    kept.push_back(t);
    end = std::max(end, t.end);
    if (t.op.kind == partitioner::OpKind::kForward || t.op.kind == partitioner::OpKind::kBackward)
      r.run.busy_s[static_cast<size_t>(t.worker)] += t.end - t.start;
  }
  r.run.ops = std::move(kept);
  r.run.transfers.clear();
  r.makespan_s = r.run.makespan = end;
  double busy = 0;
  for (double b : r.run.busy_s) busy += b;
  r.bubble_fraction = end > 0 ? 1 - busy / (double(r.run.busy_s.size()) * end) : 0;
  return r;
}

// "dir/checkpoint.step<N>.onnx" for the message about rotated checkpoints.
std::string rotated_pattern(const std::string& checkpoint) {
  std::string p = importer::rotated_checkpoint_path(checkpoint, 0);
  return p.replace(p.rfind(".step0"), 6, ".step<N>");
}

void write_text(const std::string& path, const std::string& text) {
  partitioner::write_file_atomically(path, text);
}

}  // namespace

void add_pipeline_options(CLI::App& cmd, TrainArgs& a) {
  cmd.add_option("--stages", a.stages,
                 "Pipeline over this many worker threads: a straight pipeline balanced by "
                 "measured layer times. The cut can differ between runs, and with it 1f1b's "
                 "and 2bw's training (their weight delays are per stage); --plan fixes it")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--workers", a.workers,
                 "Pipeline over this many worker threads as the DP partitioner chooses "
                 "(stages may be replicated)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--plan", a.plan_path, "Run this plan (JSON from `pipetrain partition`)");
  cmd.add_option("--schedule", a.schedule,
                 "1f1b (PipeDream: asynchronous, weight stashing), 1f1b-flush, gpipe, 2bw, zb-h1 "
                 "(1F1B-flush with weight gradients deferred into the bubbles), zb-h2 (zb-h1 with "
                 "up to 2P - 1 microbatches in flight per stage, with --stages), zb-v (two model "
                 "chunks per worker in a V, weight gradients filling the bubbles, with --stages), "
                 "dualpipev (the V fed from both ends, forward and backward paired, with "
                 "--stages), v-half (the V at half zb-v's activation memory, with --stages), "
                 "interleaved (--chunks model chunks per worker, with --stages), auto "
                 "(simulate them all at every microbatch count, run the fastest), search "
                 "(a flush schedule searched for on the measured profile, with --stages), or a "
                 "schedule file (.json or .csv: each worker's actions, docs/pipelining.md)")
      ->capture_default_str();
  cmd.add_option("--semantics", a.semantics,
                 "--schedule auto: any, or exact (flush schedules only: the same updates as one "
                 "worker)")
      ->check(CLI::IsMember({"any", "exact"}))
      ->capture_default_str();
  cmd.add_option("--chunks", a.chunks,
                 "--schedule interleaved: virtual stages per worker (the model is cut into "
                 "--stages x --chunks, worker w holding w, w + P, ...)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_flag("--recompute", a.recompute,
               "Activation recomputation: keep only each stage's inputs per microbatch in flight "
               "and run its forward again before the backward (less memory, one more forward)");
  cmd.add_option("--bn-stats", a.bn_stats,
                 "BatchNorm statistics under microbatches: microbatch (each its own, as GPipe), "
                 "or minibatch (a BatchNorm stage runs a step's microbatches at once, so flush "
                 "schedules match one worker; 1f1b-flush and zb-h1 then run in gpipe's order)")
      ->check(CLI::IsMember({"microbatch", "minibatch"}))
      ->capture_default_str();
  cmd.add_option("--weight-grads", a.weight_grads,
                 "gpipe and 1f1b-flush: batched (each microbatch's backward computes its input "
                 "gradients only; each stage computes the step's weight gradients at once, at the "
                 "minibatch size, in the drain: wide products for narrow ones, every stash kept "
                 "until then), per-microbatch, or auto (the stages where the simulator finds "
                 "batching faster without raising their peak memory by over 5%; the choice "
                 "follows the measured profile, so the weights' last bits may differ between "
                 "runs)")
      ->check(CLI::IsMember({"auto", "batched", "per-microbatch"}))
      ->capture_default_str();
  cmd.add_option("--memory", a.memory_bytes,
                 "--schedule auto: bytes per worker a schedule's simulated peak may use")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--pin", a.pin,
                 "Threads of one process: bind each worker to cores of its own: auto (when the "
                 "workers' threads take every core this process may use), on (whenever they "
                 "fit), off (they float)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd.add_flag("--vertical-sync", a.vertical_sync,
               "1f1b: every stage runs a minibatch on the weight version stage 0 used");
  cmd.add_option(
         "--microbatches", a.microbatches,
         "Microbatches per step for 1f1b-flush, gpipe, zb-h1 and 2bw (the --batch minibatch is "
         "cut into them; default: the smallest count of at least 2 x stages that "
         "divides --batch)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--round", a.round_limit,
                 "1f1b and 2bw: steps the pipeline runs before it drains (evaluation, "
                 "checkpoints and Ctrl-C wait for a drain)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--checkpoint-every", a.checkpoint_every,
                 "Write a checkpoint every N steps (and at Ctrl-C)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--checkpoint", a.checkpoint,
                 "Checkpoint file (default: <run-dir>/checkpoint.onnx)");
  cmd.add_option("--resume", a.resume,
                 "Continue from this checkpoint, or 'latest': the newest one at --checkpoint or "
                 "rotated beside it that verifies (none yet: start at step 0)");
  cmd.add_option("--max-restarts", a.max_restarts,
                 "Supervise the run: when it dies (a crash, a kill), start it again from the "
                 "newest valid checkpoint, at most this many times (mpirun jobs: pipetrain launch)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--hang-timeout", a.hang_timeout,
                 "With --max-restarts: restart when no round ends for this many seconds (a hung "
                 "or stopped run; allow for startup and a whole round)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--keep-checkpoints", a.keep_checkpoints,
                 "Keep the newest K checkpoints as <stem>.step<N>.onnx beside --checkpoint (which "
                 "names the newest)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--comm", a.comm,
                 "local: the workers are threads of this process; mpi: one worker per rank of "
                 "`mpirun -np <workers> pipetrain train ... --comm mpi`; nccl: as mpi, with "
                 "tensors moving between the ranks' GPUs over NCCL (--backend cuda)")
      ->check(CLI::IsMember({"local", "mpi", "nccl"}))
      ->capture_default_str();
  cmd.add_option("--peer-timeout", a.peer_timeout,
                 "With --comm mpi/nccl: stop the job when a rank is silent this many seconds "
                 "(stopped, hung, host gone); 0 waits forever (under a debugger)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

namespace {

// The run on this process: all of it (comm null), or rank comm->rank()'s worker.
void run_pipelined(TrainArgs& a, exec::Communicator* comm) {
  const bool root = !comm || comm->rank() == 0;
  const bool auto_schedule = a.schedule == "auto";
  // search: rank 0 searches on the run's plan and profile, and every rank runs the
  // schedule found as a schedule file of stage s on worker s.
  const bool search_schedule = a.schedule == "search";
  ScheduleKind kind = auto_schedule     ? ScheduleKind::kPipeDream
                      : search_schedule ? ScheduleKind::kFromFile
                                        : train_schedule(a.schedule);
  if (search_schedule && (a.stages == 0 || a.workers > 0 || !a.plan_path.empty()))
    throw PlanError("--schedule search runs on --stages P workers (a straight plan)");
  if (auto_schedule && a.microbatches > 0)
    throw PlanError("--schedule auto chooses the microbatch count; drop --microbatches");
  if (auto_schedule && a.vertical_sync)
    throw PlanError("--vertical-sync applies to --schedule 1f1b only, not auto");
  if (!auto_schedule && (a.semantics != "any" || a.memory_bytes > 0))
    throw PlanError("--semantics and --memory choose a schedule: give --schedule auto");
  if (a.vertical_sync && kind != ScheduleKind::kPipeDream)
    throw PlanError("--vertical-sync applies to --schedule 1f1b only");
  if (a.profile) throw PlanError("--profile times one worker; use `pipetrain profile` instead");
  // A schedule file: rank 0 reads and validates it (one message, nothing run), and
  // every rank runs the same action lists on as many workers as it names.
  std::optional<partitioner::Schedule> file_schedule;
  std::vector<std::vector<int>> file_held;  // its placement, unless stage s on worker s
  if (kind == ScheduleKind::kFromFile && !search_schedule) {
    std::string text;
    if (root) text = partitioner::schedule_to_json(partitioner::load_schedule_file(a.schedule));
    if (comm) text = exec::share_text(*comm, "schedule file", text);
    file_schedule = partitioner::parse_schedule(text, false, a.schedule);
    const int fw = static_cast<int>(file_schedule->programs.size());
    if (a.workers > 0 || !a.plan_path.empty())
      throw PlanError("--schedule " + a.schedule + " places its own stages: give --stages " +
                      std::to_string(fw) + " (or nothing), not --workers or --plan");
    if (a.stages > 0 && a.stages != fw)
      throw PlanError(fmt::format("--schedule {} runs on {} workers, not --stages {}", a.schedule,
                                  fw, a.stages));
    if (a.microbatches > 0 && a.microbatches != file_schedule->num_microbatches)
      throw PlanError(
          fmt::format("--schedule {} runs {} microbatches per step, not "
                      "--microbatches {}",
                      a.schedule, file_schedule->num_microbatches, a.microbatches));
    a.stages = fw;
    a.microbatches = file_schedule->num_microbatches;
    file_held = file_placement(*file_schedule);
  }

  // The plan: from the file, or measured here on the whole minibatch.
  ModelOptions full_opts = a.model;
  ir::Graph full = importer::import_model(a.model.path, full_opts.import_options());
  if (full.inputs.empty()) throw ModelError(a.model.path + ": the model has no inputs");
  data::DataSplit split = load_train_data(a, full);
  const autodiff::LossSpec loss = train_loss_spec(a, full, split);
  autodiff::TrainingGraph full_tg = autodiff::build_training_graph(full, loss);
  const exec::DataBinding binding = bind_train_data(a, full_tg, split);
  // The workers share the cores (across processes: this host's ranks do).
  // The profile is measured with the thread count the workers will use
  // (oneDNN tunes its kernels to it).
  const int planned_workers = a.workers > 0  ? a.workers
                              : a.stages > 0 ? a.stages
                                             : partitioner::load_plan(a.plan_path).workers_used();
  if (root) check_train_outputs(a);  // rank 0 writes them (a bad schedule file: no run dir)
  // Several model chunks per worker: a plan of virtual stages (place_chunk, or the file's).
  bool chunked =
      kind == ScheduleKind::kInterleaved || partitioner::v_shaped(kind) || !file_held.empty();
  if (partitioner::v_shaped(kind) && a.chunks != 2)
    throw PlanError("--schedule " + a.schedule + " holds 2 model chunks per worker in a V; " +
                    "--chunks " + std::to_string(a.chunks) + " is for interleaved");
  if (chunked && (a.stages == 0 || a.workers > 0 || !a.plan_path.empty()))
    throw PlanError("--schedule " + a.schedule + " runs on --stages P workers (P x " +
                    (kind == ScheduleKind::kInterleaved ? "--chunks" : "2") +
                    " virtual stages, balanced by measured time)");
  if (chunked && a.chunks < 1) throw PlanError("--chunks must be at least 1");
  const int sharing = comm ? exec::mpi_local_size() : planned_workers;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = a.threads > 0 ? a.threads : std::max(1, cores / sharing);
  exec::set_cpu_threads(threads);
  // Across processes the links are timed (every rank takes part) unless a
  // plan file brings its own topology; threads hand tensors over in memory.
  partitioner::Topology links = local_topology(planned_workers);
  const bool time_links = comm && a.plan_path.empty() && planned_workers == comm->size();
  if (time_links) links = exec::measure_job_topology(*comm);
  // The checkpoint to resume from, found before planning: a resumed run keeps
  // the plan it was written under when asked for the same shape.
  const std::string checkpoint =
      a.checkpoint.empty() ? a.run_dir + "/checkpoint.onnx" : a.checkpoint;
  std::optional<importer::Checkpoint> resumed;
  std::string resume_path = a.resume;
  if (a.resume == "latest") {
    // Rank 0 chooses (its files are the ones written); every rank loads that file.
    std::optional<importer::FoundCheckpoint> found;
    if (root) {
      found = importer::latest_checkpoint(
          checkpoint, [](const std::string& w) { fmt::print(stderr, "warning: {}\n", w); });
      resume_path = found ? found->path : "";
      if (found)
        resumed = std::move(found->checkpoint);
      else
        fmt::print("--resume latest: no checkpoint at {} yet; starting at step 0\n", checkpoint);
    }
    if (comm) resume_path = exec::share_text(*comm, "resume", resume_path);
    if (!root && !resume_path.empty()) resumed = importer::load_checkpoint(resume_path);
  } else if (!a.resume.empty()) {
    resumed = importer::load_checkpoint(a.resume);
  }
  // Rank 0 measures and plans; every rank runs its plan.
  partitioner::Profile profile;
  partitioner::Plan plan;
  // On the CPU, the cut follows the arithmetic the workers will do (bf16 or fp32).
  auto plan_backend = [&]() -> std::unique_ptr<exec::Backend> {
    return a.backend == "cpu" ? a.make_backend() : exec::make_cpu_backend();
  };
  if (root) {
    if (time_links) fmt::print("links between the ranks, measured: {}\n", links.describe());
    profile = exec::measure_training_profile(full_tg, random_feeds(full_tg.graph, "train"), 1, 3,
                                             nullptr, 0, plan_backend);
    profile.model = a.model.path;
    if (!file_held.empty()) {
      plan = virtual_plan(
          profile, file_schedule->num_stages,
          fmt::format("--schedule {} places {}", a.schedule, file_schedule->num_stages));
    } else if (chunked) {
      plan = chunk_plan(profile, kind, a.stages, a.chunks);
    } else if (auto kept = plan_to_keep(a, resumed, profile)) {
      plan = *kept;
      fmt::print("the plan of {} (the same shape; give --plan to choose another)\n", resume_path);
    } else {
      plan = choose_plan(a, profile, links);
    }
  }
  if (comm)
    plan = partitioner::plan_from_json(nlohmann::json::parse(
        exec::share_text(*comm, "plan", root ? partitioner::to_json(plan).dump() : "")));
  if (auto_schedule) {
    // Rank 0 simulates and chooses; every rank runs its choice.
    std::string choice;
    if (root) {
      AutoScheduleOptions ao;
      ao.semantics = a.semantics;
      ao.memory_bytes = a.memory_bytes;
      ao.clip_norm = a.trainer.clip_norm > 0;
      ao.recompute = a.recompute;
      ao.optimizer_state = optimizer_state_per_param(a.trainer.optimizer);
      ao.bn_minibatch = a.bn_stats == "minibatch" && exec::has_batch_statistics(full_tg.graph);
      // Interleaved cuts the model its own way: straight --stages only.
      if (a.stages > 0 && a.workers == 0 && a.plan_path.empty())
        ao.virtual_plan = [&](int virtual_stages, ScheduleKind k) {
          return chunk_plan(profile, k, a.stages, virtual_stages / a.stages);
        };
      // Each microbatch count on a profile at its own size, as the run that
      // follows predicts from (beside the other workers, update included).
      ao.profile_at = [&](int count) {
        const int beside = comm || a.backend != "cpu" ? 0 : plan.workers_used() - 1;
        std::optional<autodiff::TrainingGraph> narrow;
        if (count > 1) {
          ModelOptions o = a.model;
          o.batch = a.model.batch / count;
          narrow = autodiff::build_training_graph(
              importer::import_model(a.model.path, o.import_options()), loss);
        }
        const autodiff::TrainingGraph& t = narrow ? *narrow : full_tg;
        partitioner::Profile p = exec::measure_training_profile(
            t, random_feeds(t.graph, "train"), 1, 3, &a.trainer.optimizer, beside, plan_backend);
        exec::scale_profile(p, count);
        p.model = a.model.path;
        return p;
      };
      const ScheduleChoice c = choose_schedule(plan, profile, a.model.batch, ao);
      choice = fmt::format("{} {} {} {}", c.name, c.microbatches, c.chunks, c.recompute ? 1 : 0);
    }
    if (comm) choice = exec::share_text(*comm, "schedule", choice);
    std::istringstream chosen(choice);
    int recompute = 0;
    chosen >> a.schedule >> a.microbatches >> a.chunks >> recompute;
    if (recompute && !a.recompute) {
      a.recompute = true;
      if (root) fmt::print("schedule auto: activations recomputed to fit --memory\n");
    }
    kind = train_schedule(a.schedule);
    if (kind == ScheduleKind::kPipeDream) a.microbatches = 0;
    chunked = kind == ScheduleKind::kInterleaved || partitioner::v_shaped(kind);
    if (chunked) {
      if (root) plan = chunk_plan(profile, kind, a.stages, a.chunks);
      if (comm)
        plan = partitioner::plan_from_json(nlohmann::json::parse(exec::share_text(
            *comm, "virtual stage plan", root ? partitioner::to_json(plan).dump() : "")));
    }
  }
  if (search_schedule) {
    const int count =
        microbatch_count(a, ScheduleKind::kOneFOneB, static_cast<int>(plan.stages.size()));
    std::string text, v_plan;
    if (root) {
      partitioner::SimOptions so;
      so.microbatches = count;
      so.synced_updates = a.trainer.clip_norm > 0;
      so.recompute = a.recompute;
      so.optimizer_state = optimizer_state_per_param(a.trainer.optimizer);
      // Straight on the plan's stages, and bent into a V on 2P virtual stages cut by
      // measured time (as zb-v runs); the faster runs.
      using Placements = partitioner::SearchOptions::Placements;
      partitioner::SearchOptions search;
      search.placements = Placements::kStraight;
      partitioner::SearchResult found = partitioner::search_schedule(plan, profile, so, search);
      std::string where = "straight";
      if (a.stages > 1 && static_cast<int>(profile.layers.size()) >= 2 * a.stages) {
        const partitioner::Plan bent = chunk_plan(profile, ScheduleKind::kZeroBubbleV, a.stages, 2);
        const auto [view, view_profile] = partitioner::interleaved_worker_view(
            bent, profile, a.stages, ScheduleKind::kZeroBubbleV);
        search.placements = Placements::kV;
        partitioner::SearchResult v = partitioner::search_schedule(view, view_profile, so, search);
        fmt::print("schedule search in a V: {:.3f} ms per step simulated; straight: {:.3f} ms\n",
                   v.sim.makespan_s * 1e3, found.sim.makespan_s * 1e3);
        if (v.sim.makespan_s < found.sim.makespan_s) {
          found = std::move(v);
          where = "a V";
          plan = bent;
          v_plan = partitioner::to_json(plan).dump();
        }
      }
      fmt::print(
          "schedule search ({}): {:.3f} ms per step simulated, {:.1f}% below the best hand-made "
          "flush schedule within {:.1f} MiB per worker ({}, {:.3f} ms); lower bound (the busiest "
          "worker's compute) {:.3f} ms; {} simulations\n",
          where, found.sim.makespan_s * 1e3,
          100 * (1 - found.sim.makespan_s / found.best_hand_made_s),
          found.memory_limit_bytes / 1048576.0, found.best_hand_made, found.best_hand_made_s * 1e3,
          found.lower_bound_s * 1e3, found.simulations);
      text = partitioner::schedule_to_json(found.schedule);
    }
    if (comm) {
      text = exec::share_text(*comm, "searched schedule", text);
      v_plan = exec::share_text(*comm, "searched schedule's plan", v_plan);
      if (!v_plan.empty()) plan = partitioner::plan_from_json(nlohmann::json::parse(v_plan));
    }
    file_schedule = partitioner::parse_schedule(text, false, "search");
    file_held = file_placement(*file_schedule);
    chunked = !file_held.empty();
    a.microbatches = count;
  }
  const int workers = chunked ? a.stages : plan.workers_used();
  // Pipeline positions the schedule cuts microbatches for: workers when chunked.
  const int p = chunked ? a.stages : static_cast<int>(plan.stages.size());
  const bool flush = partitioner::flush_schedule(kind);
  if (kind == ScheduleKind::kPipeDream && a.microbatches > 1)
    throw PlanError(
        "--schedule 1f1b runs each --batch minibatch whole (one update each); "
        "--microbatches is for 1f1b-flush, gpipe and 2bw");
  const int m = kind == ScheduleKind::kPipeDream ? 1 : microbatch_count(a, kind, p);
  // Batched weight gradients need a step of several microbatches and the
  // graph at the minibatch size (full_tg, kept when m > 1).
  const bool batchable = (kind == ScheduleKind::kGPipe || kind == ScheduleKind::kOneFOneB) && m > 1;
  if (a.weight_grads == "batched" && !batchable)
    throw PlanError(
        "--weight-grads batched runs with gpipe and 1f1b-flush over 2 or more "
        "microbatches, not " +
        a.schedule + " with " + std::to_string(m));

  // The graph the workers run, at the microbatch size (the one already built
  // when a minibatch is one microbatch).
  ModelOptions micro_opts = a.model;
  micro_opts.batch = a.model.batch / m;
  ir::Graph model =
      m == 1 ? std::move(full) : importer::import_model(a.model.path, micro_opts.import_options());
  for (const auto& in : model.inputs) {
    const ir::Shape& s = model.tensor(in).shape;
    if (m > 1 && !s.empty() && s[0] != micro_opts.batch)
      throw PlanError(fmt::format(
          "{}: input '{}' fixes the batch at {} {}, so the model cannot run microbatches of {} "
          "({} x {} = --batch {}): export it with a dynamic batch axis (torch.onnx.export(..., "
          "dynamic_axes={{'{}': {{0: 'batch'}}}})), or run one microbatch per step "
          "(--microbatches 1 with a flush schedule)",
          a.model.path, in, s[0], ir::shape_str(s), micro_opts.batch, m, micro_opts.batch,
          a.model.batch, in));
  }
  autodiff::TrainingGraph tg =
      m == 1 ? std::move(full_tg) : autodiff::build_training_graph(model, loss);
  int64_t start_step = 0;
  if (resumed) {
    const importer::Checkpoint& c = *resumed;
    for (const auto& [key, mine] : std::map<std::string, std::string>{
             {"batch", std::to_string(a.model.batch)}, {"seed", std::to_string(a.seed)}})
      if (c.meta.count(key) && c.meta.at(key) != mine)
        throw ModelError(resume_path + ": written with --" + key + " " + c.meta.at(key) +
                         "; resume with the same --" + key + " (the data order depends on it)");
    importer::restore_checkpoint(c, tg.graph, resume_path);
    start_step = std::stoll(c.meta.at("step"));
    if (root) fmt::print("resuming from {} at step {}\n", resume_path, start_step);
    resumed.reset();
  }

  // The prediction's profile: the graph the workers run (one microbatch),
  // with the optimizer update, stated per minibatch; the plan above came
  // from the whole minibatch, which flatters small microbatches. The other
  // workers on this host run beside it meanwhile, as they will in training
  // (their contention made the demo's stages 20-50% slower than a quiet profile).
  std::function<std::unique_ptr<exec::Backend>(int)> worker_backend;  // null: the CPU's
  if (a.backend == "cpu" && (a.precision_kind() != exec::Precision::kFp32 || a.model.no_fuse)) {
    worker_backend = [&a](int) { return a.make_backend(); };  // bf16, or row-major activations
  } else if (a.backend != "cpu") {
    // Worker w on GPU w mod count; across processes, the rank's local GPU.
    const int gpus = a.backend == "cuda" ? std::max(1, exec::cuda_device_count()) : 1;
    const int local_rank = comm ? exec::mpi_local_rank() : 0;
    worker_backend = [name = a.backend, gpus, local_rank, multi = comm != nullptr,
                      precision = a.precision_kind()](int w) {
      return exec::make_backend(name, (multi ? local_rank : w) % gpus, precision);
    };
  }
  partitioner::Profile run_profile;
  if (root) {
    // Threads only: this host's other MPI ranks already occupy their cores
    // meanwhile, polling in the collective that waits for this profile. On
    // the workers' own backend (a GPU's times, not the CPU's), without
    // neighbours there: each worker has a device of its own.
    const int beside = comm || a.backend != "cpu" ? 0 : workers - 1;  // interleaved: P, not P x v
    // Medians of 25 steps where that takes under about 4 s (7 at least):
    // with 7 the LeNet demo's prediction moved by a third between runs, with
    // 25 by under 2%.
    const double step_s = profile.compute_s() / m;  // the plan's profile: the whole minibatch
    const int runs = std::clamp(step_s > 0 ? static_cast<int>(4.0 / step_s) : 25, 7, 25);
    const auto feeds = random_feeds(tg.graph, "train");
    const auto run_backend = worker_backend ? std::function<std::unique_ptr<exec::Backend>()>([&] {
      return worker_backend(comm ? comm->rank() : 0);
    })
                                            : std::function<std::unique_ptr<exec::Backend>()>();
    run_profile = exec::measure_training_profile(tg, feeds, 3, runs, &a.trainer.optimizer, beside,
                                                 run_backend);
    // A V's cut, balanced on the microbatch the workers run: on the whole minibatch's
    // profile (the plan's) the demo GPT's workers ran 68% and 92% busy.
    if (partitioner::v_shaped(kind) && file_held.empty())
      plan = chunk_plan(run_profile, kind, a.stages, a.chunks);
    // Then each stage's share as its own program runs it on a worker.
    std::vector<std::pair<int, int>> ranges;
    for (const auto& st : plan.stages) ranges.emplace_back(st.first_layer, st.last_layer);
    run_profile =
        exec::calibrate_to_stages(std::move(run_profile), tg, ranges, feeds, a.trainer.optimizer, 3,
                                  runs, beside, run_backend, partitioner::splits_backward(kind));
    // Batched weight gradients: each stage's weight half timed at the minibatch size.
    if (batchable && a.weight_grads != "per-microbatch")
      exec::measure_weight_steps(run_profile, full_tg, ranges, random_feeds(full_tg.graph, "train"),
                                 a.trainer.optimizer, 3, runs, beside, run_backend);
    exec::scale_profile(run_profile, m);
  }
  if (comm && partitioner::v_shaped(kind) && file_held.empty())
    plan = partitioner::plan_from_json(nlohmann::json::parse(
        exec::share_text(*comm, "V plan", root ? partitioner::to_json(plan).dump() : "")));
  // The simulation of the run (the choice of batched stages, the report).
  partitioner::SimOptions so;
  so.synced_updates = a.trainer.clip_norm > 0;
  so.recompute = a.recompute;
  so.overlap_allreduce = kind != ScheduleKind::kTwoBW;  // as the executor runs it
  so.microbatches = m;
  so.chunks = a.chunks;
  so.optimizer_state = optimizer_state_per_param(a.trainer.optimizer);
  // Rank 0 chooses the stages that batch their weight gradients; every rank runs them.
  std::vector<bool> batched;
  if (batchable && a.weight_grads != "per-microbatch") {
    std::string flags;
    if (root) {
      batched = a.weight_grads == "batched"
                    ? std::vector<bool>(plan.stages.size(), true)
                    : partitioner::best_batched_weights(plan, run_profile, kind, so);
      for (bool b : batched) flags += b ? '1' : '0';
    }
    if (comm) flags = exec::share_text(*comm, "weight gradients", flags);
    batched.clear();
    for (char c : flags) batched.push_back(c == '1');
  }

  exec::PipelineOptions po;
  po.schedule = kind;
  po.microbatches = m;
  po.vertical_sync = a.vertical_sync;
  po.optimizer = a.trainer.optimizer;
  po.lr_schedule = a.trainer.schedule;
  po.clip_norm = a.trainer.clip_norm;
  po.recompute = a.recompute;
  // The minibatch graph for BatchNorm stages (--bn-stats minibatch); with
  // one microbatch per step every stage already normalises the minibatch.
  if (a.bn_stats == "minibatch" && m > 1) po.minibatch_graph = &full_tg;
  if (!batched.empty()) {
    po.weight_gradients = a.weight_grads == "batched" ? exec::WeightGradients::kBatched
                                                      : exec::WeightGradients::kAuto;
    po.batched_stages = batched;
    po.step_graph = &full_tg;
  }
  po.chunks = a.chunks;
  po.schedule_file = file_schedule ? &*file_schedule : nullptr;
  po.seed = a.seed;
  po.threads_per_worker = threads;
  po.pin_workers = exec::parse_pin_workers(a.pin);
  po.comm = comm;
  po.make_backend = worker_backend;
  std::vector<exec::PipelineStage> stages;
  for (const auto& st : plan.stages)
    stages.push_back({st.first_layer, st.last_layer, st.replication, st.recompute});
  if (static_cast<int>(tg.graph.layers.size()) != plan.num_layers)
    throw PlanError("the plan has " + std::to_string(plan.num_layers) + " layers but " +
                    a.model.path + " imports with " + std::to_string(tg.graph.layers.size()) +
                    " (use the --layer-depth the plan was made with)");
  if (po.lr_schedule.total_steps == 0) {
    const int64_t per_epoch = split.train.size() / a.model.batch;
    po.lr_schedule.total_steps = a.max_steps > 0 ? a.max_steps : a.epochs * per_epoch;
  }
  exec::Pipeline pipe(tg, stages, po);

  if (root)
    fmt::print(
        "{}: {:.3f} M params; '{}': {} train, {} test samples\n"
        "pipeline: {} stage{} on {} workers ({}{}), schedule {}{}, minibatch {} = {} x {}, "
        "{} thread{} per worker{}, backend {}{}\n",
        a.model.path, model.param_count() / 1e6, a.data, split.train.size(), split.test.size(),
        plan.stages.size(), plan.stages.size() > 1 ? "s" : "", workers,
        !file_held.empty() ? fmt::format("placed by {}", a.schedule)
        : chunked          ? fmt::format("{}, {} chunks per worker", a.schedule, a.chunks)
                           : plan.config(),
        comm ? fmt::format(", one per MPI rank, {} transfers", a.comm) : "", a.schedule,
        a.vertical_sync ? " with vertical sync" : "", a.model.batch, m, a.model.batch / m, threads,
        threads > 1 ? "s" : "", pinned_cores(pipe.worker_cores()),
        a.backend + (a.precision == "bf16" ? " bf16" : ""), stage_list(plan));
  if (root && pipe.batched_weights()) {
    std::string list;
    for (size_t st = 0; st < pipe.batched_stages().size(); ++st)
      if (pipe.batched_stages()[st]) list += (list.empty() ? "" : ", ") + std::to_string(st);
    fmt::print("weight gradients: batched once per step on stage{} {}\n",
               list.find(',') != std::string::npos ? "s" : "", list);
  } else if (root && !pipe.weight_gradients_note().empty()) {
    fmt::print("{}\n", pipe.weight_gradients_note());
  } else if (root && batchable && a.weight_grads == "auto") {
    fmt::print(
        "weight gradients: per microbatch (batching simulated no faster, or over 5% more "
        "memory)\n");
  }
  if (const auto whole = pipe.whole_minibatch_stages(); root && !whole.empty()) {
    std::string list;
    for (int st : whole) list += (list.empty() ? "" : ", ") + std::to_string(st);
    fmt::print(
        "--bn-stats minibatch: stage{} {} run{} each step's {} microbatches at once (BatchNorm on "
        "the minibatch's statistics; the prediction below times them per microbatch){}\n",
        whole.size() > 1 ? "s" : "", list, whole.size() > 1 ? "" : "s", m,
        pipe.options().schedule != kind ? fmt::format("; {} runs in gpipe's order", a.schedule)
                                        : "");
    kind = pipe.options().schedule;
  }

  // Rank 0 reports and writes the files; the other ranks train quietly.
  std::optional<TrainReport> report;
  if (root) {
    std::filesystem::create_directories(a.run_dir);
    // The plan as run (with the measured links across processes): `--plan` takes it back.
    write_text(a.run_dir + "/plan.json", partitioner::to_json(plan).dump(2) + "\n");
    report.emplace(a.quiet, a.epochs, a.run_dir + "/metrics.jsonl", a.log_every);
    report->set_unigram_loss(split.unigram_loss);
  }
  exec::PipelineFitOptions fo;
  fo.epochs = a.epochs;
  fo.seed = a.seed;
  fo.max_steps = a.max_steps;
  fo.minibatch = a.model.batch;
  fo.round_limit = a.round_limit;
  fo.checkpoint_every = a.checkpoint_every;
  fo.start_step = start_step;
  fo.stop = &StopSignals::requested();
  // The test set, evaluated on the CPU in the precision the workers train in
  // (as one worker's run does).
  auto backend = a.backend == "cpu" ? a.make_backend() : exec::make_cpu_backend();
  std::vector<double> busy(static_cast<size_t>(workers), 0.0);
  exec::RoundResult shown;
  int64_t last_checkpoint = -1;
  // Rank 0 snapshots the weights at a checkpoint and writes them on a thread of its own.
  const std::string plan_json = partitioner::to_json(plan).dump();
  std::optional<importer::CheckpointWriter> writer;
  if (root) writer.emplace(checkpoint, a.keep_checkpoints);
  double snapshot_s = 0;
  exec::PipelineFitResult result;
  try {
    result = exec::fit_pipeline(
        pipe, tg, model, *backend, binding, split, fo,
        {[&](const exec::StepReport& s) {
           if (report) report->step(s);
         },
         [&](const exec::EpochReport& e) {
           if (report) report->epoch(e);
         },
         [&](const exec::RoundResult& r) {
           if (root) touch_heartbeat();
           for (size_t w = 0; w < r.busy_s.size(); ++w) busy[w] += r.busy_s[w];
           if (r.losses.size() >= shown.losses.size()) shown = r;
         },
         [&](int64_t step) {
           if (!root) return;
           const auto t0 = std::chrono::steady_clock::now();
           writer->submit(importer::checkpoint_of(tg.graph,
                                                  {{"step", std::to_string(step)},
                                                   {"batch", std::to_string(a.model.batch)},
                                                   {"seed", std::to_string(a.seed)},
                                                   {"schedule", a.schedule},
                                                   {"plan", plan_json},
                                                   {"model", a.model.path}},
                                                  /*copy=*/true),
                          step);
           snapshot_s +=
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
           last_checkpoint = step;
         }});
  } catch (const RuntimeFault& e) {
    std::string kept =
        last_checkpoint >= 0
            ? fmt::format("; the last good checkpoint is {} (step {})", checkpoint, last_checkpoint)
            : std::string("; no checkpoint was written");
    try {
      if (writer) writer->finish();
    } catch (const std::exception& w) {
      kept = std::string("; the last checkpoint write failed too: ") + w.what();
    }
    throw RuntimeFault(std::string(e.what()) + kept);
  }
  if (writer) writer->finish();
  if (result.stopped && !root) {
    StopSignals::mark_stopped();
    throw ExitRequest{StopSignals::exit_code()};
  }
  if (!root) return;
  report->write_loss_svg(a.run_dir + "/loss.svg");
  if (writer->written() > 0)
    fmt::print(
        "checkpoints: {} written to {}{}; training paused {:.1f} ms for each snapshot, the writes "
        "took {:.1f} ms each in the background\n",
        writer->written(), checkpoint,
        a.keep_checkpoints > 1 ? fmt::format(" (the newest {} kept as {})", a.keep_checkpoints,
                                             rotated_pattern(checkpoint))
                               : "",
        1e3 * snapshot_s / static_cast<double>(writer->written()),
        1e3 * writer->write_seconds() / static_cast<double>(writer->written()));
  if (result.stopped) {
    fmt::print("\ninterrupted at step {} ({}): checkpoint {} (continue with --resume {})\n",
               result.steps, StopSignals::name(), checkpoint, checkpoint);
    StopSignals::mark_stopped();
    throw ExitRequest{StopSignals::exit_code()};
  }

  // Utilisation and memory against the simulator, throughput, timelines.
  so.microbatches = flush || kind == ScheduleKind::kTwoBW
                        ? m
                        : std::max<int>(1, static_cast<int>(shown.losses.size()));
  so.batched_weights = pipe.batched_stages();
  so.schedule = file_schedule ? &*file_schedule : nullptr;
  auto [sim_plan, sim_profile] =
      !file_held.empty() ? partitioner::worker_view(plan, run_profile, file_held, a.schedule)
      : chunked          ? partitioner::interleaved_worker_view(plan, run_profile, workers, kind)
                         : std::make_pair(plan, run_profile);
  partitioner::SimResult sim = partitioner::simulate(sim_plan, sim_profile, kind, so);
  fmt::print(
      "utilisation (compute / training time), stashes and memory per worker (activations "
      "stashed, weight versions, gradients, optimizer state; simulated for its stage):\n");
  const auto stats = pipe.stats();
  for (size_t w = 0; w < stats.size(); ++w) {
    // The simulator's stage: the plan's, or with interleaving the worker's chunks.
    const size_t st = chunked ? w : static_cast<size_t>(stats[w].stage);
    const double simulated = st < sim.stages.size() ? sim.stages[st].peak_memory_bytes : 0;
    fmt::print(
        "  worker {} (stage {}{}): {:5.1f}% busy, {} microbatches in flight at most, {} "
        "weight version{}, {:.1f} MiB stashed at most; {:.2f} MiB held at most, simulated "
        "{:.2f} MiB ({:.2f}x)\n",
        w, stats[w].stage,
        stats[w].replica > 0 || plan.stages[static_cast<size_t>(stats[w].stage)].replication > 1
            ? fmt::format(" replica {}", stats[w].replica)
            : "",
        result.train_seconds > 0 ? 100 * busy[w] / result.train_seconds : 0.0,
        stats[w].peak_in_flight, stats[w].peak_weight_versions,
        stats[w].peak_weight_versions > 1 ? "s" : "", stats[w].peak_stash_bytes / 1048576.0,
        stats[w].peak_bytes() / 1048576.0, simulated / 1048576.0,
        simulated > 0 ? static_cast<double>(stats[w].peak_bytes()) / simulated : 0.0);
  }
  // A device backend's ledger per worker, per round from the third (the caches warm).
  for (size_t w = 0; w < stats.size(); ++w) {
    const int rounds = stats[w].rounds - 2;
    if (stats[w].ledger.to_device == 0 || rounds <= 0) continue;
    const exec::TransferStats d = stats[w].ledger - stats[w].ledger_warm;
    const auto per = [&](size_t v) { return static_cast<double>(v) / rounds; };
    fmt::print(
        "  worker {} device ledger per round ({} rounds from the third): "
        "{:.3f} MiB up, {:.3f} MiB down, {:.1f} host syncs, {:.1f} device allocations\n",
        w, rounds, per(d.to_device) / 1048576.0, per(d.to_host) / 1048576.0, per(d.host_syncs),
        per(d.device_allocations));
  }
  if (a.trainer.clip_norm > 0 && flush) {
    int provisional = 0, redone = 0;
    for (const auto& st : stats) {
      provisional += st.provisional_updates;
      redone += st.redone_updates;
    }
    fmt::print(
        "clip-norm, post-validation: {} stage updates went ahead of the global norm, {} of "
        "them redone because it clipped\n",
        provisional, redone);
  }
  const double measured = result.train_seconds > 0 ? result.samples / result.train_seconds : 0;
  // Asynchronous 1F1B drains at every round boundary here, so the rate to
  // compare is the simulated round's, fill and drain included (the
  // simulator's own figure is the steady state between them).
  double predicted = sim.samples_per_s;
  if (kind == ScheduleKind::kPipeDream && sim.makespan_s > 0)
    predicted = static_cast<double>(so.microbatches) * sim_profile.batch / sim.makespan_s;
  fmt::print(
      "throughput: measured {:.0f} samples/s, simulator predicts {:.0f} samples/s for this plan "
      "and schedule from a profile on the {} backend (measured / predicted = {:.2f})\n",
      measured, predicted, run_profile.device, predicted > 0 ? measured / predicted : 0);
  // The simulator gives every worker a core of its own; sharing fewer, the
  // profile (timed beside busy neighbours) swings between runs (LeNet, 3
  // stages on 2 cores: 3,154 to 7,174 samples/s predicted for one command).
  if (!comm && a.backend == "cpu" && sharing * threads > cores)
    fmt::print(
        "note: {} workers x {} thread{} share {} core{}, so the prediction (each worker on "
        "cores of its own) is rough and its profile varies between runs\n",
        sharing, threads, threads > 1 ? "s" : "", cores, cores > 1 ? "s" : "");
  if (!shown.ops.empty()) {
    sim.schedule = "simulated " + a.schedule;
    auto real = as_sim_result(shown, "measured " + a.schedule, workers);
    // The whole round in the trace; its first microbatches in the picture.
    write_text(a.run_dir + "/timeline.json", partitioner::chrome_trace({sim, real}));
    const int k = flush ? m : 4 * workers;
    write_text(
        a.run_dir + "/timeline.svg",
        partitioner::svg_timeline({first_microbatches(sim, k), first_microbatches(real, k)}));
    fmt::print(
        "timelines, simulated and measured: {}/timeline.json (a whole round), {}/timeline.svg "
        "(its first {} microbatches)\n",
        a.run_dir, a.run_dir, k);
  }
  fmt::print("metrics: {}/metrics.jsonl, loss curve: {}/loss.svg, plan: {}/plan.json\n", a.run_dir,
             a.run_dir, a.run_dir);
  if (!a.output.empty()) {
    importer::save_trained_weights(a.model.path, model, a.output);
    fmt::print("trained model: {}\n", a.output);
  }
}

}  // namespace

void train_pipelined(TrainArgs& a) {
  if (a.max_restarts > 0) {
    if (a.comm != "local")
      throw PlanError("--max-restarts supervises worker threads; for --comm " + a.comm +
                      " run the job under `pipetrain launch --max-restarts K -- mpirun ...`");
    if (a.checkpoint_every == 0)
      throw PlanError("--max-restarts restarts from checkpoints: give --checkpoint-every N");
    if (const auto code = supervise_self(a.max_restarts, a.hang_timeout)) {
      if (*code != 0) throw ExitRequest{*code};
      return;
    }
  }
  StopSignals signals;
  std::unique_ptr<exec::Communicator> control, comm;  // control: NCCL's MPI side
  const auto peer_timeout = std::chrono::milliseconds(std::lround(a.peer_timeout * 1000));
  if (a.comm == "mpi") {
    comm = exec::make_mpi_communicator(size_t(1) << 30, peer_timeout);
  } else if (a.comm == "nccl") {
    if (a.backend != "cuda")
      throw PlanError("--comm nccl moves tensors between GPUs: add --backend cuda");
    control = exec::make_mpi_communicator(size_t(1) << 30, peer_timeout);
    const int gpus = exec::cuda_device_count();
    comm = exec::make_nccl_communicator(*control, gpus > 0 ? exec::mpi_local_rank() % gpus : 0,
                                        size_t(1) << 30);
  } else if (const int ranks = exec::mpi_launched_size(); ranks > 1) {
    throw PlanError("mpirun started " + std::to_string(ranks) +
                    " ranks of pipetrain: add --comm mpi (otherwise each would train the whole "
                    "pipeline alone)");
  }
  try {
    run_pipelined(a, comm.get());
  } catch (const ExitRequest&) {
    throw;
  } catch (const std::exception& e) {
    if (!comm) throw;
    // Tell every rank (those waiting on this one would wait forever). Every
    // abort reaches rank 0 (or, when rank 0 is gone, the rank that speaks for
    // the job), so it alone says why: one message, not one per rank.
    comm->abort(e.what());
    if (!comm->speaks_for_job()) throw ExitRequest{1};
    throw;
  }
}

}  // namespace pipetrain::cli
