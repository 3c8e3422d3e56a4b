// Runs the models scripts/export_reference_models.py exported from PyTorch and
// compares pipetrain's outputs with PyTorch's float64 outputs on the same
// inputs, then the gradients build_backward derives for loss = sum_i
// sum(output_i * seed_i) with PyTorch's float64 autograd gradients of every
// parameter. Error measure per tensor: max |ours - ref| / max |ref| (relative
// to the tensor's scale, so near-zero elements do not dominate). Bound: 1e-4
// for outputs and 1e-3 for gradients, or twice the error float32 can reach
// where that is larger: the larger of float32 PyTorch's own error against
// float64 (torch32_error.txt) and the float64 result's own movement under
// float32-sized perturbations of weights and inputs (float64_spread.txt).
// Deep BatchNorm nets on batch statistics amplify float32 rounding whoever
// computes them, and near a ReLU kink a gradient jumps. A gradient that is
// zero in exact arithmetic (a convolution's bias before an InstanceNorm: its
// float64 reference is 1e-14 where the model's gradients are 10-100) has no
// scale of its own, so its error is measured against the model's largest
// gradient instead, with the 1e-3 bound (float32's rounding noise divided by
// float64's, the plain measure there, differs by the summation order alone).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>

#include <malloc.h>

#include "autodiff/autodiff.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "importer/importer.h"
#include "ir/npy.h"

namespace fs = std::filesystem;
using namespace pipetrain;

namespace {
constexpr double kOutputBound = 1e-4, kGradientBound = 1e-3;

// torch32_error.txt and float64_spread.txt: "output <i> <err>" and "grad
// <name> <err>" lines; per tensor the larger of the two.
std::map<std::string, double> float32_reachable(const fs::path& dir) {
  std::map<std::string, double> errs;
  for (const char* file : {"torch32_error.txt", "float64_spread.txt"}) {
    std::ifstream f(dir / file);
    for (std::string kind, name; f >> kind >> name;) {
      double e = 0;
      f >> e;
      double& v = errs[kind + " " + name];
      v = std::max(v, e);
    }
  }
  return errs;
}

double bound_for(const std::map<std::string, double>& torch32, const std::string& key,
                 double base) {
  const auto it = torch32.find(key);
  return it == torch32.end() ? base : std::max(base, 2 * it->second);
}

double max_abs(const ir::Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(t.at(i)));
  return m;
}

/// max |got - want| / max(max |want|, floor).
double relative_error(const ir::Tensor& got, const ir::Tensor& want, double floor = 1e-30) {
  if (got.shape() != want.shape()) return INFINITY;
  double diff = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    diff = std::max(diff, std::abs(got.at(i) - want.at(i)));
  return std::isnan(diff) ? INFINITY : diff / std::max(max_abs(want), floor);
}

// Appends loss = sum_k ReduceSum(output_k * seed_k), differentiates with respect
// to the initializers grads.txt lists, and compares with PyTorch's gradients.
bool check_gradients(const fs::path& dir, ir::Graph g,
                     const std::map<std::string, ir::Tensor>& feeds,
                     const std::map<std::string, double>& torch32) {
  std::ifstream index(dir / "grads.txt");
  if (!index) return true;                                    // exported without gradients
  std::vector<std::pair<std::string, std::string>> expected;  // initializer, file
  for (std::string name, file; index >> name >> file;) expected.emplace_back(name, file);
  std::string loss;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    fs::path seed_path = dir / ("seed_" + std::to_string(k) + ".npy");
    if (!fs::exists(seed_path)) continue;
    const std::string o = g.outputs[k], s = "ref/seed" + std::to_string(k);
    g.set_value(s, ir::load_npy(seed_path.string()), ir::Role::kConstant);
    g.nodes.push_back({"ref/mul" + std::to_string(k), "Mul", {o, s}, {s + "*"}, {}});
    g.nodes.push_back({"ref/sum" + std::to_string(k),
                       "ReduceSum",
                       {s + "*"},
                       {s + "+"},
                       {{"keepdims", ir::Attribute(int64_t{0})}}});
    if (loss.empty()) {
      loss = s + "+";
    } else {
      g.nodes.push_back({"ref/add" + std::to_string(k), "Add", {loss, s + "+"}, {s + "L"}, {}});
      loss = s + "L";
    }
  }
  g.layers.clear();
  for (auto& n : g.nodes) n.layer = -1;
  g.infer_shapes();
  autodiff::BackwardOptions opts;
  for (const auto& [name, file] : expected) opts.wrt.push_back(name);
  autodiff::BackwardResult bw = autodiff::build_backward(g, loss, opts);
  auto backend = exec::make_cpu_backend();
  auto outs = exec::ForwardRunner(g, *backend).run(feeds);
  std::map<std::string, ir::Tensor> want;
  double model_scale = 0;  // the largest reference gradient element
  for (const auto& [name, file] : expected) {
    want[name] = ir::load_npy((dir / "grads" / file).string());
    model_scale = std::max(model_scale, max_abs(want[name]));
  }
  double worst = 0;  // the largest error / bound
  std::string worst_name;
  int failed = 0;
  for (const auto& [name, file] : expected) {
    auto it = bw.grads.find(name);
    // Zero in float32 at the model's scale: zero in exact arithmetic.
    const bool zero = max_abs(want[name]) < 0x1p-24 * model_scale;
    double err = it == bw.grads.end()
                     ? INFINITY
                     : relative_error(outs.at(it->second), want[name], zero ? model_scale : 1e-30);
    const double bound = zero ? kGradientBound : bound_for(torch32, "grad " + name, kGradientBound);
    if (!(err <= bound)) {
      ++failed;
      std::printf("  %-12s   gradient of %s: rel. error %.2e, bound %.2e\n", dir.filename().c_str(),
                  name.c_str(), err, bound);
    }
    if (!(err / bound <= worst)) {
      worst = err / bound;
      worst_name = name;
    }
  }
  std::printf("  %-12s %zu parameter gradients, worst at %.2f of its bound (%s)  %s\n",
              dir.filename().c_str(), expected.size(), worst, worst_name.c_str(),
              failed == 0 ? "ok" : "FAIL");
  return failed == 0;
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
  const auto torch32 = float32_reachable(dir);
  bool ok = true;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    fs::path want_path = dir / ("output_" + std::to_string(k) + ".npy");
    if (!fs::exists(want_path)) continue;  // extra outputs (BatchNorm running stats)
    double err = relative_error(outs.at(g.outputs[k]), ir::load_npy(want_path.string()));
    const double bound = bound_for(torch32, "output " + std::to_string(k), kOutputBound);
    bool pass = err <= bound;
    std::printf("  %-12s output %zu %-18s rel. error %.2e (bound %.2e)  %s\n",
                dir.filename().c_str(), k, ir::shape_str(outs.at(g.outputs[k]).shape()).c_str(),
                err, bound, pass ? "ok" : "FAIL");
    ok = ok && pass;
  }
  // Gradients are checked even when an output fails: both say where to look.
  const bool grads_ok = check_gradients(dir, g, feeds, torch32);
  return ok && grads_ok;
}
}  // namespace

int main(int argc, char** argv) {
  // The heap keeps what is freed: glibc maps each large .npy buffer afresh and unmaps it on
  // free, and the page faults of those fresh pages were half the check's time (10 of 19 s
  // in the kernel, 11 runs in the test command).
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
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
