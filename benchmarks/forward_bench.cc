// Forward-pass time of ONNX models on pipetrain's CPU backend.
// Usage: forward_bench --model=NAME=path.onnx [--model=...] [--threads=N] [--row-major]
//                      [benchmark flags]
// Inputs are seeded N(0,1) tensors; the time is one full forward pass.
// --row-major: also times each model with every activation row-major
// (forward_row_major/NAME: the blocked layout off, executor/layout_plan.h).
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "importer/importer.h"
#include "ir/cost.h"

using namespace pipetrain;

namespace {

struct Model {
  std::string name;
  ir::Graph graph;
  std::map<std::string, ir::Tensor> feeds;
};

Model load(const std::string& name, const std::string& path) {
  importer::ImportOptions options;
  options.inference = true;  // forward only: the forward-only fusions too, as `pipetrain run`
  Model m{name, importer::import_model(path, options), {}};
  std::mt19937 rng(0);
  std::normal_distribution<float> dist;
  for (const auto& in : m.graph.inputs) {
    const auto& d = m.graph.tensor(in);
    ir::Tensor t(d.dtype, d.shape);
    if (d.dtype == ir::DType::kF32)
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
    m.feeds[in] = t;
  }
  return m;
}

void bm_forward(benchmark::State& state, Model* m, bool blocked_layout) {
  exec::CpuBackendOptions cpu;
  cpu.blocked_layout = blocked_layout;
  auto backend = exec::make_cpu_backend(cpu);
  exec::ForwardRunner runner(m->graph, *backend, /*plan_memory=*/true);
  runner.run(m->feeds);  // warm-up: primitive caches, page faults
  for (auto _ : state) benchmark::DoNotOptimize(runner.run(m->feeds));
  int64_t flops = 0;
  for (const auto& n : m->graph.nodes) flops += ir::node_flops(m->graph, n);
  state.counters["GFLOP/s"] =
      benchmark::Counter(double(flops) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  std::vector<std::unique_ptr<Model>> models;
  int threads = 1;
  bool row_major = false;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--model=", 8) == 0) {
      std::string spec = argv[i] + 8;
      size_t eq = spec.find('=');
      models.push_back(std::make_unique<Model>(load(spec.substr(0, eq), spec.substr(eq + 1))));
    } else if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      threads = std::atoi(argv[i] + 10);
    } else if (std::strcmp(argv[i], "--row-major") == 0) {
      row_major = true;
    } else {
      rest.push_back(argv[i]);
    }
  }
  exec::set_cpu_threads(threads);
  for (auto& m : models)
    for (bool blocked : {true, false}) {
      if (!blocked && !row_major) continue;
      const std::string name = (blocked ? "forward/" : "forward_row_major/") + m->name;
      benchmark::RegisterBenchmark(name.c_str(), bm_forward, m.get(), blocked)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(2.0);
    }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
