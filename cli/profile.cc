// `pipetrain profile model.onnx --device v100 --batch 32 -o profile.json`:
// per-layer times and bytes, analytic (a device spec's roofline) or measured
// (timed training steps on the CPU backend: forward and backward nodes of the
// training graph, so backward times are real), optionally also as PipeDream's
// graph.txt. The measuring loop lives in the partitioner (measured_profile);
// this file only hands it a ForwardRunner, which the partitioner may not link.
#include <fmt/core.h>

#include <memory>
#include <random>

#include "autodiff/training_graph.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/random_inputs.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "executor/measured_profile.h"
#include "importer/importer.h"
#include "ir/error.h"
#include "partitioner/graph_txt.h"
#include "partitioner/profile_ir.h"

namespace pipetrain::cli {

namespace {

struct ProfileArgs {
  ModelOptions model;
  std::string device = "v100";
  std::string output;
  std::string graph_txt;
  bool tf32 = false;
  int runs = 5;
  int warmup = 2;
  int threads = 1;
  std::string loss = "auto";  // measured: auto, own, cross-entropy or mse
  std::string loss_output;
};

// "auto": the model's own loss when it has one (a one-element float output),
// else cross-entropy on the first output.
autodiff::LossSpec loss_spec(const ir::Graph& g, const ProfileArgs& a) {
  if (a.loss == "own") return {"", a.loss_output};
  if (a.loss != "auto") return {a.loss, a.loss_output};
  for (const auto& o : g.outputs) {
    const ir::TensorDesc& d = g.tensor(o);
    if (ir::is_float(d.dtype) && ir::numel(d.shape) == 1) return {"", ""};
  }
  return {"cross-entropy", a.loss_output};
}

void run_profile(const ProfileArgs& a) {
  ir::Graph g = importer::import_model(a.model.path, a.model.import_options());
  partitioner::Profile p;
  if (a.device == "measured") {
    exec::set_cpu_threads(a.threads);
    autodiff::TrainingGraph tg = autodiff::build_training_graph(g, loss_spec(g, a));
    p = exec::measure_training_profile(tg, random_feeds(tg.graph, "profile --device measured"),
                                       a.warmup, a.runs);
  } else {
    partitioner::AnalyticOptions o;
    o.tf32 = a.tf32;
    p = partitioner::analytic_profile(g, partitioner::device_spec(a.device), o);
  }
  if (p.model.empty()) p.model = a.model.path;
  partitioner::save_profile(p, a.output);
  if (!a.graph_txt.empty())
    partitioner::write_file_atomically(a.graph_txt, partitioner::write_graph_txt(p));
  fmt::print(
      "{} layers, batch {}, {} on {}: {:.3f} ms per minibatch (forward + backward{}), "
      "{:.1f} MB of parameters\n",
      p.layers.size(), p.batch, p.source, p.device, p.compute_s() * 1e3,
      p.backward_estimated ? ", backward estimated as 2x forward" : "",
      double(p.param_bytes()) / 1e6);
  fmt::print("wrote {}{}\n", a.output, a.graph_txt.empty() ? "" : " and " + a.graph_txt);
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "profile", "Per-layer times and bytes of a model: analytic from a device spec or measured");
  auto a = std::make_shared<ProfileArgs>();
  a->model.add_to(*cmd);
  cmd->add_option("--device", a->device,
                  "v100, a100, h100 (published peaks), local-cpu (this CPU's measured peaks) "
                  "or measured (timed training steps on the CPU backend, backward included)")
      ->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Profile JSON to write")->required();
  cmd->add_option("--graph-txt", a->graph_txt, "Also write PipeDream's graph.txt");
  cmd->add_flag("--tf32", a->tf32, "Analytic: TF32 tensor-core peak for Conv/Gemm/MatMul/LSTM");
  cmd->add_option("--runs", a->runs, "Measured: timed runs (the median counts)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "Measured: untimed runs first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "Measured: CPU threads")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--loss", a->loss,
                  "Measured: the loss of the timed training step: auto (the model's own if it "
                  "has one, else cross-entropy), own, cross-entropy or mse")
      ->check(CLI::IsMember({"auto", "own", "cross-entropy", "mse"}))
      ->capture_default_str();
  cmd->add_option("--loss-output", a->loss_output, "Measured: the output the attached loss reads");
  cmd->callback([a] { run_profile(*a); });
}

}  // namespace pipetrain::cli
