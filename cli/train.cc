// `pipetrain train model.onnx --data fashion-mnist --epochs 3 --batch 64
//  --optimizer sgd --lr 0.05 --momentum 0.9 -o trained.onnx`: one worker, or
// pipelined with --stages, --workers or --plan (cli/train_pipeline.cc).
#include <fmt/core.h>

#include <filesystem>

#include "autodiff/training_graph.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/op_time_table.h"
#include "cli/output_paths.h"
#include "cli/train_args.h"
#include "cli/train_data.h"
#include "cli/train_report.h"
#include "data/dataset.h"
#include "executor/backend.h"
#include "executor/comm/mpi_communicator.h"
#include "executor/fit.h"
#include "ir/error.h"

namespace pipetrain::cli {

namespace {

// Checkpoints, --resume and restarts live in the pipelined runtime.
bool wants_checkpoints(const TrainArgs& a) {
  return a.checkpoint_every > 0 || !a.checkpoint.empty() || !a.resume.empty() ||
         a.keep_checkpoints > 1 || a.max_restarts > 0;
}

// A device backend's ledger over the training steps alone: each step's part from
// the third on (the first two fill the caches), where no evaluation ran since the
// step before (one runs before each epoch's first step).
struct StepLedger {
  exec::TransferStats sum, last;
  int64_t steps = 0;
  void after(const exec::StepReport& s, const exec::TransferStats& now) {
    if (s.step >= 2 && s.batch > 0) {
      sum += now - last;
      ++steps;
    }
    last = now;
  }
  void print() const {
    if (steps == 0 || last.to_device == 0) return;  // no steps to count, or not a device
    const auto per = [&](size_t v) { return static_cast<double>(v) / static_cast<double>(steps); };
    fmt::print(
        "device ledger per training step ({} steps from the third, evaluation left out): "
        "{:.3f} MiB up, {:.3f} MiB down, {:.1f} host syncs, {:.1f} device allocations\n",
        steps, per(sum.to_device) / 1048576.0, per(sum.to_host) / 1048576.0, per(sum.host_syncs),
        per(sum.device_allocations));
  }
};

void train(TrainArgs& a) {
  // A float16 or bfloat16 model trains with float32 master weights and is
  // written back in its own dtype (importer/float_widening.cc).
  a.model.half_as_float32 = true;
  a.model.resolve_batch();
  if (!a.pipelined() && wants_checkpoints(a)) {
    // One worker that asks for checkpoints runs as a one-stage pipeline: the
    // same steps (tests/cli/pipeline_train_test.py checks the weights bitwise).
    if (a.backend != "cpu")
      throw PlanError(
          "checkpoints (--checkpoint, --checkpoint-every, --resume, --max-restarts) "
          "run one worker as a one-stage pipeline, on --backend cpu only (got '" +
          a.backend + "')");
    a.stages = 1;
    // With the plain run's thread count too: OpenBLAS's GEMMs on 2 threads
    // round differently from 1 on some CPUs (AVX2, Haswell kernels).
    if (a.threads <= 0) a.threads = 1;
    fmt::print("checkpoints asked for: one worker runs as a one-stage pipeline\n");
  }
  if (a.pipelined()) return train_pipelined(a);
  // One worker has no pipeline to order: a schedule named here would be ignored.
  if (a.schedule != TrainArgs().schedule)
    throw PlanError("--schedule " + a.schedule +
                    " orders a pipeline's work: give --stages P (or --workers N, --plan FILE)");
  check_train_outputs(a);
  if (a.comm != "local" || exec::mpi_launched_size() > 1)
    throw PlanError(
        "--comm " + a.comm +
        " runs a pipeline with one worker per rank: give --stages, --workers or --plan");
  exec::set_cpu_threads(a.threads > 0 ? a.threads : 1);
  ir::Graph model = importer::import_model(a.model.path, a.model.import_options());
  if (model.inputs.empty()) throw ModelError(a.model.path + ": the model has no inputs");
  data::DataSplit split = load_train_data(a, model);
  autodiff::TrainingGraph tg =
      autodiff::build_training_graph(model, train_loss_spec(a, model, split));
  const exec::DataBinding binding = bind_train_data(a, tg, split);
  auto backend = a.make_backend();
  a.trainer.seed = a.seed;
  if (a.trainer.schedule.total_steps == 0)
    a.trainer.schedule.total_steps =
        a.max_steps > 0 ? a.max_steps : a.epochs * (split.train.size() / a.model.batch);
  std::vector<double> node_seconds;
  if (a.profile) a.trainer.node_seconds = &node_seconds;
  exec::Trainer trainer(tg, *backend, a.trainer);
  const exec::MemoryPlan& plan = trainer.memory_plan();
  fmt::print(
      "{}: {:.3f} M params, {} forward + {} backward nodes; '{}': {} train, {} test samples\n",
      a.model.path, model.param_count() / 1e6, model.nodes.size(),
      tg.graph.nodes.size() - model.nodes.size(), a.data, split.train.size(), split.test.size());
  fmt::print("memory plan: {:.1f} MiB arena (live peak {:.1f} MiB, {:.1f} MiB without reuse)\n",
             plan.arena_bytes / 1048576.0, plan.peak_live_bytes / 1048576.0,
             plan.naive_bytes / 1048576.0);
  std::filesystem::create_directories(a.run_dir);
  TrainReport report(a.quiet, a.epochs, a.run_dir + "/metrics.jsonl", a.log_every);
  report.set_unigram_loss(split.unigram_loss);
  exec::FitOptions fo;
  fo.epochs = a.epochs;
  fo.seed = a.seed;
  fo.max_steps = a.max_steps;
  StepLedger ledger;
  exec::fit(trainer, tg, model, *backend, binding, split, fo,
            {[&](const exec::StepReport& s) {
               ledger.after(s, backend->transfers());
               report.step(s);
             },
             [&](const exec::EpochReport& e) { report.epoch(e); }});
  report.write_loss_svg(a.run_dir + "/loss.svg");
  if (a.profile) {
    print_profile(tg.graph, node_seconds, static_cast<int>(trainer.steps_done()));
    ledger.print();
  }
  if (const exec::TransferStats moved = backend->transfers();
      moved.to_device + moved.to_host > 0 && trainer.steps_done() > 0)
    fmt::print(
        "host-device traffic: {:.1f} MiB to the device, {:.1f} MiB back ({:.2f} MiB per step, "
        "evaluation included)\n",
        moved.to_device / 1048576.0, moved.to_host / 1048576.0,
        (moved.to_device + moved.to_host) / 1048576.0 / static_cast<double>(trainer.steps_done()));
  fmt::print("metrics: {}/metrics.jsonl, loss curve: {}/loss.svg\n", a.run_dir, a.run_dir);
  if (!a.output.empty()) {
    importer::save_trained_weights(a.model.path, model, a.output);
    fmt::print("trained model: {}\n", a.output);
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd =
      app.add_subcommand("train", "Train a model on one worker, or pipelined over worker threads");
  a->model.add_to(*cmd);
  cmd->add_option("--data", a->data,
                  "Dataset: fashion-mnist, digits, synthetic:blobs|regression|spirals, "
                  "text:PATH (UTF-8 file or directory), tokens:FILE (.npy or uint16 .bin), "
                  "csv:FILE or jsonl:FILE (text classification), or "
                  "files (IDX directory, .csv, .npy pair, .npz or directory of NAME.npy arrays "
                  "named after the model's inputs)")
      ->required();
  cmd->add_option("--labels", a->labels_key, "Named-array datasets: the array holding the labels")
      ->capture_default_str();
  cmd->add_option("--ignore-index", a->ignore_index,
                  "cross-entropy: labels equal to this count for nothing (the mean is over the "
                  "others)")
      ->capture_default_str();
  add_text_data_options(*cmd, *a);
  cmd->add_option("--epochs", a->epochs, "Passes over the training split")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-steps", a->max_steps, "Stop after this many steps in all");
  cmd->add_option("--max-samples", a->max_samples, "Use only the first N samples of each split");
  cmd->add_option("--test-fraction", a->test_fraction,
                  "Held-out share for datasets without a fixed test split");
  cmd->add_option("--loss", a->loss,
                  "Attach a loss to an output: cross-entropy or mse (default: the model's own)");
  cmd->add_option("--loss-output", a->loss_output, "The output the attached loss reads");
  auto& o = a->trainer.optimizer;
  cmd->add_option("--optimizer", o.kind, "sgd, adam or adamw")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  cmd->add_option("--lr", o.lr, "Learning rate");
  cmd->add_option("--momentum", o.momentum, "SGD momentum");
  cmd->add_flag("--nesterov", o.nesterov, "SGD with Nesterov momentum");
  cmd->add_option("--weight-decay", o.weight_decay, "L2 (sgd, adam) or decoupled (adamw) decay");
  cmd->add_option("--beta1", o.beta1, "Adam beta1");
  cmd->add_option("--beta2", o.beta2, "Adam beta2");
  auto& s = a->trainer.schedule;
  cmd->add_option("--lr-schedule", s.kind, "Learning-rate schedule: constant, step or cosine")
      ->check(CLI::IsMember({"constant", "step", "cosine"}));
  cmd->add_option("--warmup", s.warmup_steps, "Linear warm-up steps");
  cmd->add_option("--step-size", s.step_size, "step schedule: steps between decays");
  cmd->add_option("--gamma", s.gamma, "step schedule: decay factor");
  cmd->add_option("--clip-norm", a->trainer.clip_norm, "Clip the global gradient norm");
  cmd->add_option("-o,--output", a->output, "Write the trained model here (ONNX)");
  cmd->add_option("--run-dir", a->run_dir, "Directory for metrics.jsonl and loss.svg");
  cmd->add_option("--log-every", a->log_every, "metrics.jsonl: a line every N steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed for shuffling, splits and dropout");
  cmd->add_option("--threads", a->threads,
                  "CPU threads for BLAS and oneDNN (per worker when pipelined; default: 1, or the "
                  "cores shared among the workers)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--backend", a->backend,
                  "cpu; cuda (one GPU; pipelined: worker w on GPU w mod the GPUs present, or the "
                  "rank's local GPU with --comm mpi); portable (the CUDA kernels' code run on the "
                  "CPU, for checking)")
      ->check(CLI::IsMember({"cpu", "cuda", "portable"}))
      ->capture_default_str();
  cmd->add_option("--precision", a->precision,
                  "fp32, or bf16 mixed precision: GEMMs, convolutions and LSTMs on bf16-rounded "
                  "inputs and outputs with fp32 accumulation, fp32 master weights (cpu: needs "
                  "AVX512-BF16 or AMX; cuda; portable)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  cmd->add_flag("--quiet", a->quiet, "One line per epoch instead of a progress bar");
  cmd->add_flag("--profile", a->profile,
                "Print the time per op type of a training step, and a device backend's ledger per "
                "step (MiB up and down, host synchronisations, device allocations)");
  add_pipeline_options(*cmd, *a);
  cmd->callback([a] { train(*a); });
}

}  // namespace pipetrain::cli
