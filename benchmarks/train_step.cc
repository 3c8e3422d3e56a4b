// Times one training step (forward, loss, backward, SGD update) of an ONNX
// model in pipetrain: random inputs, cross-entropy on the first output,
// median over --steps after --warmup. Prints one JSON line; the comparison
// script (compare_training.py) runs PyTorch and onnxruntime-training beside it.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <random>

#include "autodiff/training_graph.h"
#include "cli/op_time_table.h"
#include "executor/trainer.h"
#include "importer/importer.h"

using namespace pipetrain;

int main(int argc, char** argv) {
  CLI::App app{"pipetrain training-step timer"};
  std::string model_path;
  int64_t batch = 32, steps = 10, warmup = 2, classes = 0;
  int threads = 1;
  bool profile = false, no_fuse = false;
  std::string backend_name = "cpu";
  app.add_option("model", model_path)->required();
  app.add_option("--backend", backend_name, "cpu, cuda or portable");
  bool bf16 = false;
  app.add_flag("--bf16", bf16,
               "bf16 mixed precision (cpu with AVX512-BF16 or AMX, cuda, portable)");
  app.add_option("--batch", batch);
  app.add_option("--steps", steps);
  app.add_option("--warmup", warmup);
  app.add_option("--threads", threads);
  app.add_option("--classes", classes, "Label range (default: the output's dim 1)");
  app.add_flag("--profile", profile, "Print the time per op type (to stderr's neighbour, stdout)");
  app.add_flag("--no-fuse", no_fuse,
               "Import without the fusion passes; the cpu backend keeps activations row-major");
  CLI11_PARSE(app, argc, argv);
  try {
    exec::set_cpu_threads(threads);
    importer::ImportOptions io;
    io.batch = batch;
    io.fuse = !no_fuse;
    ir::Graph model = importer::import_model(model_path, io);
    autodiff::TrainingGraph tg = autodiff::build_training_graph(model, {"cross-entropy", ""});
    auto backend = backend_name == "cpu" && no_fuse
                       ? exec::make_cpu_backend({/*blocked_layout=*/false})
                       : exec::make_backend(backend_name, 0,
                                            bf16 ? exec::Precision::kBf16 : exec::Precision::kFp32);
    exec::TrainerOptions to;
    to.optimizer.lr = 0.01;
    to.optimizer.momentum = 0.9;
    std::vector<double> node_seconds;
    if (profile) to.node_seconds = &node_seconds;
    exec::Trainer trainer(tg, *backend, to);
    std::mt19937_64 rng(0);
    std::map<std::string, ir::Tensor> feeds;
    for (const auto& in : tg.graph.inputs) {
      const ir::TensorDesc& d = tg.graph.tensor(in);
      ir::Tensor t(d.dtype, d.shape);
      if (in == tg.labels) {
        const int64_t c = classes > 0 ? classes : tg.graph.tensor(tg.prediction).shape.at(1);
        for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = int64_t(rng() % c);
      } else if (d.dtype == ir::DType::kF32) {
        std::normal_distribution<float> nd;
        for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = nd(rng);
      } else {
        for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = int64_t(rng() % 100);
      }
      feeds[in] = t;
    }
    std::vector<double> ms;
    exec::TransferStats after_warmup;
    for (int64_t s = 0; s < warmup + steps; ++s) {
      if (s == warmup) {
        node_seconds.assign(node_seconds.size(), 0.0);  // the profile skips warm-up
        after_warmup = backend->transfers();
      }
      auto t0 = std::chrono::steady_clock::now();
      trainer.step(feeds);
      double dt =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (s >= warmup) ms.push_back(dt);
    }
    std::sort(ms.begin(), ms.end());
    if (profile) {
      cli::print_profile(tg.graph, node_seconds, static_cast<int>(steps));
      double in_nodes = 0, total = 0;
      for (double v : node_seconds) in_nodes += v;
      for (double v : ms) total += v;
      fmt::print(
          "outside the nodes (optimizer update, uploads, the step's bookkeeping): {:.2f} ms of "
          "{:.2f} ms a step\n",
          (total - in_nodes * 1e3) / static_cast<double>(steps),
          total / static_cast<double>(steps));
    }
    // A device backend's ledger per timed step (the warm-up fills its caches): traffic,
    // beside what staging every node's inputs and outputs (no residency) would move, host
    // synchronisations and device allocations.
    const exec::TransferStats moved = backend->transfers() - after_warmup;
    double staged = 0;
    for (const ir::Node& n : tg.graph.nodes)
      for (const auto* names : {&n.inputs, &n.outputs})
        for (const std::string& t : *names)
          if (!t.empty() && tg.graph.has_tensor(t)) {
            const ir::TensorDesc& d = tg.graph.tensor(t);
            staged += static_cast<double>(ir::numel(d.shape) * ir::dtype_size(d.dtype));
          }
    const auto per_step = [&](double v) { return v / static_cast<double>(steps); };
    fmt::print(
        "{{\"median_ms\": {:.3f}, \"min_ms\": {:.3f}, \"arena_mib\": {:.1f}, "
        "\"to_device_mib_per_step\": {:.2f}, \"to_host_mib_per_step\": {:.2f}, "
        "\"host_syncs_per_step\": {:.1f}, \"device_allocations_per_step\": {:.1f}, "
        "\"per_node_staging_mib_per_step\": {:.2f}}}\n",
        ms[ms.size() / 2], ms.front(), trainer.memory_plan().arena_bytes / 1048576.0,
        per_step(moved.to_device / 1048576.0), per_step(moved.to_host / 1048576.0),
        per_step(static_cast<double>(moved.host_syncs)),
        per_step(static_cast<double>(moved.device_allocations)), staged / 1048576.0);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
