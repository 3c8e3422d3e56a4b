// The options of `pipetrain train`, shared by the one-worker path
// (cli/train.cc) and the pipelined one (cli/train_pipeline.cc).
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "cli/model_options.h"
#include "executor/backend.h"
#include "executor/trainer.h"
#include "partitioner/schedule_file.h"

namespace pipetrain::cli {

struct TrainArgs {
  ModelOptions model;
  std::string data;
  int64_t epochs = 1;
  int64_t max_steps = 0;
  int64_t max_samples = 0;
  double test_fraction = 0.2;
  std::string loss;
  std::string loss_output;
  std::string labels_key = "labels";   // named-array datasets: the labels' array
  int64_t ignore_index = -100;         // cross-entropy: label id that counts for nothing
  int64_t seq_len = 0;                 // text:/tokens: window length (0: the model's)
  std::string tokenizer;               // text:/csv:/jsonl: tokenizer.json or .model; empty: bytes
  std::string text_column = "text";    // csv:/jsonl: the text's column or key
  std::string text_pair_column;        // csv:/jsonl: a sentence pair's second text
  std::string label_column = "label";  // csv:/jsonl: the label's column or key
  exec::TrainerOptions trainer;
  std::string output;
  std::string run_dir = "pipetrain-run";
  int64_t log_every = 10;  // metrics.jsonl: a line every this many steps
  uint64_t seed = 0;
  int threads = 0;  // 0: one worker uses 1; a pipeline shares the cores among its workers
  bool quiet = false;
  bool profile = false;
  std::string backend = "cpu";     // cpu, cuda (pipelined: one GPU per worker), portable
  std::string precision = "fp32";  // fp32 or bf16 (mixed precision)

  exec::Precision precision_kind() const {
    return precision == "bf16" ? exec::Precision::kBf16 : exec::Precision::kFp32;
  }
  /// This run's backend on `device`; on the CPU with --precision and --no-fuse
  /// (activations row-major) applied.
  std::unique_ptr<exec::Backend> make_backend(int device = 0) const {
    if (backend != "cpu") return exec::make_backend(backend, device, precision_kind());
    exec::CpuBackendOptions o;
    o.blocked_layout = !model.no_fuse;
    o.precision = precision_kind();
    return exec::make_cpu_backend(o);
  }

  // Pipelined training (any of the first three selects it).
  int stages = 0;                       // a straight pipeline, balanced by measured time
  int workers = 0;                      // the DP partitioner on this many workers (may replicate)
  std::string plan_path;                // a plan from `pipetrain partition`
  std::string schedule = "1f1b";        // or "auto": simulated and chosen (cli/schedule_auto.h)
  std::string semantics = "any";        // --schedule auto: "exact" keeps to flush schedules
  double memory_bytes = 0;              // --schedule auto: per worker; 0: no limit
  bool recompute = false;               // stash inputs only, run the forward again before backward
  std::string bn_stats = "microbatch";  // or "minibatch": BatchNorm stages run a step at once
  std::string weight_grads = "per-microbatch";  // gpipe, 1f1b-flush: or "batched", "auto"
  int chunks = 2;                               // interleaved: virtual stages per worker
  bool vertical_sync = false;
  std::string pin = "auto";  // workers on cores of their own: auto, on, off (core_pinning.h)
  int microbatches = 0;      // per step (flush schedules, 2bw); 0: a default per schedule
  int64_t round_limit = 128;
  int64_t checkpoint_every = 0;
  std::string checkpoint;      // default: <run-dir>/checkpoint.onnx
  std::string resume;          // a checkpoint file, or "latest"
  int keep_checkpoints = 1;    // rotated checkpoints kept beside `checkpoint`
  int max_restarts = 0;        // supervised: restarted from the newest checkpoint when it dies
  double hang_timeout = 0;     // supervised: restart when no round ends for this long
  std::string comm = "local";  // local: worker threads here; mpi: one worker per MPI rank
  double peer_timeout = 5.0;   // seconds a silent rank is waited for (mpi, nccl); 0: forever

  /// A schedule file places its own stages on its own workers (--stages optional).
  bool pipelined() const {
    return stages > 0 || workers > 0 || !plan_path.empty() ||
           partitioner::is_schedule_file(schedule);
  }
};

/// Registers --stages, --workers, --plan, --schedule, ... on `cmd`.
void add_pipeline_options(CLI::App& cmd, TrainArgs& a);
/// The pipelined run.
void train_pipelined(TrainArgs& a);

}  // namespace pipetrain::cli
