#include <chrono>
#include <cstdio>
#include "autodiff/training_graph.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "executor/pipeline/stage_worker.h"
#include "executor/stage_program.h"
#include "importer/importer.h"
using namespace pipetrain;
using Clock = std::chrono::steady_clock;
int main(int, char** argv) {
  exec::set_cpu_threads(1);
  importer::ImportOptions io;
  io.batch = 128;
  ir::Graph m = importer::import_model(argv[1], io);
  auto tg = autodiff::build_training_graph(m, {"cross-entropy", ""});
  auto be = exec::make_cpu_backend();
  std::map<std::string, ir::Tensor> f;
  for (auto& in : tg.graph.inputs) {
    auto& d = tg.graph.tensor(in);
    f[in] = ir::Tensor(d.dtype, d.shape);
  }
  // whole graph, per node
  exec::ForwardRunner whole(tg.graph, *be, true);
  std::vector<double> ns;
  for (int i = 0; i < 3; i++) whole.run(f, {});
  ns.assign(tg.graph.nodes.size(), 0);
  exec::RunOptions ro;
  ro.training = true;
  ro.node_seconds = &ns;
  auto t0 = Clock::now();
  for (int i = 0; i < 10; i++) whole.run(f, ro);
  double wall = std::chrono::duration<double>(Clock::now() - t0).count() / 10;
  double fw = 0, bw = 0;
  int n = tg.graph.layers.size();
  for (size_t i = 0; i < ns.size(); i++) {
    if (tg.graph.nodes[i].layer < n / 2) continue;
    (tg.graph.nodes[i].backward ? bw : fw) += ns[i] / 10;
  }
  printf("whole: wall %.1f ms; second half: F %.1f B %.1f ms\n", wall * 1e3, fw * 1e3, bw * 1e3);
  auto progs = exec::build_stage_programs(tg, {{0, n / 2 - 1}, {n / 2, n - 1}});
  exec::StageWorker sw(progs[1], tg, *be, {});
  exec::TensorMap feeds = f;
  for (auto& tr : progs[1].recv_fwd) {
    auto& d = tg.graph.tensor(tr.tensor);
    feeds[tr.tensor] = ir::Tensor(d.dtype, d.shape);
  }
  double tf = 0, tb = 0;
  for (int i = 0; i < 13; i++) {
    auto a = Clock::now();
    sw.forward(i, sw.version(), feeds, 0);
    auto b = Clock::now();
    sw.backward(i, feeds);
    auto c = Clock::now();
    sw.seal_gradients(0);
    sw.step(0, 1.0, 0.01, false);
    if (i >= 3) {
      tf += std::chrono::duration<double>(b - a).count() / 10;
      tb += std::chrono::duration<double>(c - b).count() / 10;
    }
  }
  printf("stage 1 worker: F %.1f B %.1f ms\n", tf * 1e3, tb * 1e3);
}
