// The pipelined executor: one thread per worker, each with its own backend,
// stage replica (params, optimizer, stashes) and communicator endpoint,
// running its op list of a schedule (partitioner/schedules.h). Activations
// and gradients move as messages tagged (tensor, microbatch, phase) straight
// from the producing stage's replica to the consuming one (skip connections
// included); replicas allreduce their gradients before each update. In one
// process every worker is a thread on local communicators; across processes
// (PipelineOptions::comm, e.g. MPI) each process runs its rank's worker.
//
// A round is one call of run(): flush schedules (gpipe, 1f1b) run one
// optimizer step over the microbatches given; pipedream runs each given
// minibatch with an update after its backward (weight stashing, optionally
// vertical sync); 2bw runs steps of `microbatches` each, every update one step
// late. The pipeline drains at the end of every round, so a round boundary is
// a consistent point (for checkpoints and evaluation).
#pragma once

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autodiff/training_graph.h"
#include "executor/comm/communicator.h"
#include "executor/optim/optimizer.h"
#include "executor/pipeline/core_pinning.h"
#include "executor/pipeline/rank_reports.h"
#include "executor/pipeline/stage_worker.h"
#include "partitioner/schedule.h"
#include "partitioner/schedules.h"

namespace pipetrain::exec {

struct PipelineStage {
  int first_layer = 0, last_layer = 0;  // inclusive layer range of the training graph
  int replicas = 1;
  /// This stage recomputes its activations (PipelineOptions::recompute: all).
  bool recompute = false;
};

/// Where gpipe's and 1f1b's weight gradients run.
enum class WeightGradients {
  kPerMicrobatch,  // in each microbatch's backward
  /// Each microbatch's backward computes its input gradients only; each
  /// stage then computes the step's weight gradients at once, at the
  /// minibatch size (PipelineOptions::step_graph), in the pipeline's drain:
  /// wide products instead of one narrow product per microbatch. The stashes
  /// (what the weight half reads) live until then, as in gpipe.
  kBatched,
  kAuto,  // batched where the run allows it (Pipeline::weight_gradients_note says why not)
};

struct PipelineOptions {
  partitioner::ScheduleKind schedule = partitioner::ScheduleKind::kPipeDream;
  /// Flush schedules and 2bw: microbatches per optimizer step.
  int microbatches = 1;
  /// Interleaved 1F1B: model chunks per worker (zb-v: always 2). The stages
  /// given are then the virtual stages, p x chunks of them, placed by
  /// partitioner::place_chunk (interleaved: w, w + p, ...; a V: w, 2p - 1 - w).
  int chunks = 2;
  /// ScheduleKind::kFromFile: the schedule to run (partitioner/schedule_file.h),
  /// whose stages are `stages`, placed as it says; kept alive by the caller.
  const partitioner::Schedule* schedule_file = nullptr;
  bool vertical_sync = false;  // pipedream only
  OptimizerConfig optimizer;
  LrSchedule lr_schedule;
  /// Clip the global gradient norm (over every stage; a tied or replicated
  /// param counted once) to this before each update; 0: no clipping. Every
  /// worker sends its part of the squared norm to the others at its update.
  double clip_norm = 0;
  /// How a flush schedule's update under clip_norm learns the global norm.
  /// kPostValidate (Zero Bubble's post-validation): a worker whose parts are not all
  /// here yet updates at once, provisionally, and at the end of its step waits for
  /// the norm and redoes the update, bitwise as kBarrier's, when it clips. kBarrier:
  /// waits for the norm before updating. kProvisional: post-validation that never
  /// looks for the parts first (tests). Asynchronous schedules always wait.
  enum class UpdateCheck { kPostValidate, kBarrier, kProvisional };
  UpdateCheck update_check = UpdateCheck::kPostValidate;
  /// Every stage keeps only its forward's inputs per microbatch in flight
  /// and runs the forward again before the backward (activation memory for
  /// one more forward); the gradients are bitwise those without.
  bool recompute = false;
  /// --bn-stats minibatch: the training graph at the whole minibatch's
  /// size. Stages with a training-mode BatchNorm then run each step's
  /// microbatches at once on their program cut from it, so they normalise
  /// with the minibatch's statistics as one worker does; the others still
  /// run microbatch by microbatch. Flush schedules (1f1b-flush and zb-h1 run
  /// in gpipe's order then: every forward before any backward); such stages
  /// unreplicated, without recomputation. Null: each microbatch normalises
  /// with its own statistics (as GPipe does).
  const autodiff::TrainingGraph* minibatch_graph = nullptr;
  /// gpipe and 1f1b with microbatches > 1: kBatched needs step_graph,
  /// unreplicated stages, no recomputation, no whole-minibatch stage, and
  /// weight halves that read only tensors stacked along the batch axis
  /// (check_batched_weights); a PlanError names what stands in the way.
  WeightGradients weight_gradients = WeightGradients::kPerMicrobatch;
  /// kBatched, kAuto: the stages that batch (partitioner::best_batched_weights
  /// chooses them by simulation); empty: every stage.
  std::vector<bool> batched_stages;
  /// Batched weight gradients: the training graph at the whole minibatch's
  /// size (the same graph as minibatch_graph when both are given).
  const autodiff::TrainingGraph* step_graph = nullptr;
  uint64_t seed = 0;           // dropout: microbatch i of the run uses seed + i
  int threads_per_worker = 1;  // BLAS / oneDNN threads of each worker
  /// Threads of one process: when to bind each worker (and its kernels'
  /// OpenMP team) to threads_per_worker cores of its own (core_pinning.h).
  PinWorkers pin_workers = PinWorkers::kAuto;
  size_t queue_bytes = size_t(1) << 30;  // bound on bytes in flight per pair of workers
  /// Each worker's backend (default: the CPU backend); the executor only uses
  /// the Backend interface.
  std::function<std::unique_ptr<Backend>(int worker)> make_backend;
  /// A multi-process run (--comm mpi): this process's endpoint, whose rank is
  /// the one worker this process runs (the ranks must number the workers).
  /// run(), write_back() and any_rank() are then collective: every rank calls
  /// them in the same order. Null: every worker is a thread here.
  Communicator* comm = nullptr;
};

/// What one round measured.
struct RoundResult {
  /// One loss per optimizer step (flush, 2bw: the mean over its microbatches)
  /// or per minibatch (pipedream), in order.
  std::vector<double> losses;
  /// Per optimizer update, in order: the global gradient norm before
  /// clipping (replicated and tied params counted once), as one worker's.
  std::vector<double> grad_norms;
  double seconds = 0;                     // wall time of the round
  std::vector<partitioner::TimedOp> ops;  // every F, B, Recv wait, allreduce, step
  std::vector<double> busy_s;             // per worker: F and B time
};

class Pipeline {
 public:
  /// Builds the stage programs, the workers and their threads. Throws
  /// PlanError for stages that do not fit the graph or the schedule.
  Pipeline(const autodiff::TrainingGraph& tg, std::vector<PipelineStage> stages,
           PipelineOptions options);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  /// Runs one round over `microbatches` (data feeds each: the training
  /// graph's inputs at the microbatch shape). Throws RuntimeFault naming the
  /// worker and stage when any worker fails (after stopping all of them), or
  /// when a loss or gradient is not finite; the pipeline is unusable after.
  /// Across processes, rank 0's result covers every worker (the others'
  /// cover their own).
  RoundResult run(const std::vector<TensorMap>& microbatches);

  /// Copies replica `replica`'s params, buffers and optimizer state of every
  /// stage (replica 0 of stages with fewer) into g (the training graph, or a
  /// model sharing its names). Across processes only rank 0's g is complete.
  void write_back(ir::Graph& g, int replica = 0);

  /// The process that reports, evaluates and writes files (rank 0; always
  /// true in one process).
  bool is_root() const { return !options_.comm || options_.comm->rank() == 0; }
  /// True on every process when `flag` is true on any (one process: flag).
  bool any_rank(bool flag);
  const PipelineOptions& options() const { return options_; }
  int num_workers() const { return total_workers_; }
  /// Each worker's cores (by worker) when pin_workers bound them; empty when they float.
  const std::vector<std::vector<int>>& worker_cores() const { return core_groups_; }
  int num_stages() const { return static_cast<int>(stages_.size()); }
  const std::vector<PipelineStage>& stages() const { return stages_; }
  /// --bn-stats minibatch: the stages that run each step's microbatches at once.
  std::vector<int> whole_minibatch_stages() const;
  /// Per stage, whether its weight gradients run batched once per step
  /// (WeightGradients); empty: no stage's.
  const std::vector<bool>& batched_stages() const { return batched_; }
  bool batched_weights() const {
    return std::find(batched_.begin(), batched_.end(), true) != batched_.end();
  }
  /// kAuto left a stage, or all, per microbatch: why (empty otherwise).
  const std::string& weight_gradients_note() const { return weight_note_; }
  /// Per worker (across processes: rank 0 has every worker's, as of the last round).
  std::vector<WorkerStats> stats() const;
  /// Optimizer updates applied so far (every stage applies the same number).
  int64_t updates() const;
  /// The schedule of the last round (for timelines).
  const partitioner::Schedule& last_schedule() const { return schedule_; }

 private:
  struct Worker;
  void worker_main(Worker& w);
  void run_program(Worker& w);
  void tie_chunks(Worker& w, int64_t round);
  std::vector<std::pair<int, std::string>> norm_params(int r) const;
  void send_norm_part(Worker& w, int64_t update, double scale);
  bool norm_parts_here(Worker& w, int64_t update);
  double global_grad_norm(Worker& w, int64_t update);
  double stage_grad_squares(const StageWorker& one, int stage, int64_t round, double scale) const;
  static std::vector<double> global_grad_norms(const std::vector<WorkerReport>& reports);
  partitioner::Schedule build_round_schedule(int count) const;
  /// --bn-stats minibatch: marks the BatchNorm stages whole_ and cuts their
  /// programs from options_.minibatch_graph; throws PlanError for a schedule
  /// or stage that cannot run so.
  void plan_whole_minibatch_stages(const std::vector<std::pair<int, int>>& ranges);
  /// Sets batched_ and step_programs_ from options_.weight_gradients, or
  /// the note of why not; throws PlanError for kBatched that cannot run.
  void plan_batched_weights(const std::vector<std::pair<int, int>>& ranges);

  std::vector<PipelineStage> stages_;
  PipelineOptions options_;
  std::vector<StageProgram> programs_;
  // --bn-stats minibatch: per stage, whether it runs the whole minibatch at
  // once, and the programs cut from the minibatch graph (those stages').
  std::vector<bool> whole_;
  std::vector<StageProgram> whole_programs_;
  // Batched weight gradients: every stage cut from options_.step_graph.
  std::vector<bool> batched_;
  std::vector<StageProgram> step_programs_;
  std::string weight_note_;
  std::string loss_;
  int total_workers_ = 0;
  std::vector<std::unique_ptr<Worker>> workers_;  // those this process runs
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::vector<std::vector<int>> core_groups_;  // per worker, when pinned
  std::vector<WorkerStats> all_stats_;         // rank 0 of several processes: every worker's
  int64_t collectives_ = 0;                    // write_back and any_rank calls (message tags)

  // The round being run (written by run() before the workers start).
  partitioner::Schedule schedule_;
  std::vector<struct WorkerVersions> versions_;
  const std::vector<TensorMap>* feeds_ = nullptr;
  std::vector<TensorMap> weighted_;  // the round's feeds with the loss weight 1 added
  std::string loss_weight_;          // the training graph's kLossWeight input, if any
  int64_t round_base_ = 0;           // microbatches run before this round (message tags, seeds)
  std::chrono::steady_clock::time_point round_start_;
  std::atomic<bool> failed_{false};
};

}  // namespace pipetrain::exec
