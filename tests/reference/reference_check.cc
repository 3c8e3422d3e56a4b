// Runs the models scripts/export_reference_models.py exported from PyTorch and
// compares pipetrain's outputs with PyTorch's on the same inputs.
// Error measure per output: max |ours - torch| / max |torch| (relative to the
// tensor's scale, so near-zero elements do not dominate); bound 1e-4.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "importer/importer.h"
#include "ir/npy.h"

namespace fs = std::filesystem;
using namespace pipetrain;

namespace {
constexpr double kBound = 1e-4;

double relative_error(const ir::Tensor& got, const ir::Tensor& want) {
  if (got.shape() != want.shape()) return INFINITY;
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    diff = std::max(diff, std::abs(got.at(i) - want.at(i)));
    scale = std::max(scale, std::abs(want.at(i)));
  }
  return std::isnan(diff) ? INFINITY : diff / std::max(scale, 1e-30);
}

bool check(const fs::path& dir) {
  importer::ImportOptions opts;
  opts.layer_depth = 2;
  ir::Graph g = importer::import_model((dir / "model.onnx").string(), opts);
  std::map<std::string, ir::Tensor> feeds;
  for (size_t i = 0; i < g.inputs.size(); ++i)
    feeds[g.inputs[i]] = ir::load_npy((dir / ("input_" + std::to_string(i) + ".npy")).string());
  auto backend = exec::make_cpu_backend();
  exec::ForwardRunner runner(g, *backend);
  auto outs = runner.run(feeds);
  bool ok = true;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    fs::path want_path = dir / ("output_" + std::to_string(k) + ".npy");
    if (!fs::exists(want_path)) continue;  // extra outputs (BatchNorm running stats)
    double err = relative_error(outs.at(g.outputs[k]), ir::load_npy(want_path.string()));
    bool pass = err <= kBound;
    std::printf("  %-12s output %zu %-18s rel. error %.2e  %s\n", dir.filename().c_str(), k,
                ir::shape_str(outs.at(g.outputs[k]).shape()).c_str(), err, pass ? "ok" : "FAIL");
    ok = ok && pass;
  }
  return ok;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr,
                 "usage: reference_check DIR (made by scripts/export_reference_models.py)\n");
    return 2;
  }
  int passed = 0, failed = 0;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(argv[1]))
    if (fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  for (const auto& d : dirs) {
    bool ok = false;
    try {
      ok = check(d);
    } catch (const std::exception& e) {
      std::printf("  %-12s error: %s\n", d.filename().c_str(), e.what());
    }
    (ok ? passed : failed)++;
  }
  std::printf("PyTorch reference: %d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
