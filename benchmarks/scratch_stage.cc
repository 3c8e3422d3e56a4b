#include <chrono>
#include <cstdlib>
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
  io.batch = atoi(argv[2]);
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
  int n = tg.graph.layers.size(); int cut = atoi(argv[3]);
  for (size_t i = 0; i < ns.size(); i++) {
    if (tg.graph.nodes[i].layer >= cut) continue;
    (tg.graph.nodes[i].backward ? bw : fw) += ns[i] / 10;
  }
  printf("whole: wall %.1f ms; first part: F %.1f B %.1f ms\n", wall * 1e3, fw * 1e3, bw * 1e3);
  auto progs = exec::build_stage_programs(tg, {{0, cut - 1}, {cut, n - 1}});
  exec::StageWorker sw(progs[0], tg, *be, {});
  exec::TensorMap feeds = f;
  for (auto& tr : progs[0].recv_bwd) {
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
  printf("stage 0 worker: F %.1f B %.1f ms\n", tf * 1e3, tb * 1e3);
  exec::ForwardRunner fr(progs[0].forward, *be, true);
  exec::TensorMap in; for (auto& i : progs[0].forward.inputs) in[i] = feeds.at(i);
  for (int i = 0; i < 3; i++) fr.run(in, ro);
  std::vector<double> ns2(progs[0].forward.nodes.size(), 0); exec::RunOptions r2; r2.training = true; r2.node_seconds = &ns2;
  auto a = Clock::now();
  exec::TensorMap outs;
  for (int i = 0; i < 10; i++) outs = fr.run(in, r2);
  printf("stage 0 forward runner alone: %.2f ms\n", std::chrono::duration<double>(Clock::now() - a).count() / 10 * 1e3);
  for (size_t i = 0; i < ns2.size(); i++) printf("  %s %.2f ms\n", progs[0].forward.nodes[i].name.c_str(), ns2[i] / 10 * 1e3);
  for (auto& [k, v] : outs) printf("  out %s %zu bytes\n", k.c_str(), v.nbytes());
  auto c0 = Clock::now(); for (int i = 0; i < 10; i++) for (auto& [k, v] : outs) { auto t = v.clone(); } 
  printf("clones: %.2f ms\n", std::chrono::duration<double>(Clock::now() - c0).count() / 10 * 1e3);
}
