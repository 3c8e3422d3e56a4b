// Runs every case of Debian's libonnx-testdata (ONNX's own per-operator test
// models with inputs and expected outputs) through pipetrain's importer and
// CPU kernels, and compares with the expected outputs.
//
// A case is skipped, with its reason grouped by op, when it uses an op that is
// not in ir/op_list.h, a dtype our kernels do not list, an attribute value we
// refuse, or randomness ONNX's generator drew from NumPy. Everything else must
// pass: a wrong number, an error or a crash on a supported case is a failure.
// Each case runs in a forked child, so a crash or a hang fails that case only.
//
// Integer graph inputs (shapes, axes, pads, indices) and the float operands
// that decide a shape (Resize's roi and scales) are frozen into initializers
// before import: pipetrain has static shapes, and the test models feed shape
// tensors as runtime inputs.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "importer/importer.h"
#include "importer/internal.h"
#include "importer/op_expansions.h"
#include "ir/error.h"
#include "ir/op_registry.h"

namespace fs = std::filesystem;
using namespace pipetrain;

namespace {

constexpr const char* kDataRoot = "/usr/share/libonnx-testdata/data";
constexpr int kTimeoutSeconds = 60;

// Cases whose expected outputs cannot be reproduced by any correct
// implementation: ONNX drew their dropout masks from NumPy's global RNG.
const std::set<std::string> kRandomCases = {
    "test_training_dropout",
    "test_training_dropout_default",
    "test_training_dropout_default_mask",
    "test_training_dropout_mask",
};

// Looser bounds, each with its reason. The window functions' expected
// outputs are themselves off the exact window by up to 5e-4 relative (ONNX
// 1.12's hannwindow_symmetric is not even symmetric: 0.11697116 and
// 0.11703071 where both are 0.11697778); pipetrain's windows are the exact
// values rounded to float32 (tests/importer/window_test.cc), its expanded
// float32 ops (Range, Mul, Cos) miss them by 7e-5 as onnxruntime does, and
// ONNX's own backend tests allow rtol 1e-3.
// test_gridsample_bicubic's expected outputs are PyTorch's printed to 4
// decimals (-0.1406 for -0.140625, which pipetrain and float64 PyTorch give):
// atol 5e-5 is that rounding.
const std::map<std::string, std::pair<double, double>> kLooserTolerance = {
    {"test_gridsample_bicubic", {1e-4, 5e-5}},
    // The RoiAlign cases' expected outputs are 4-decimal roundings of a float32
    // implementation: 8.4e-5 from torchvision's float64 roi_align, which
    // pipetrain matches within 3.2e-7 (and the PyTorch reference's roi_head).
    {"test_roialign_aligned_false", {1e-4, 1e-4}},
    {"test_roialign_aligned_true", {1e-4, 1e-4}},
    {"test_blackmanwindow", {1e-3, 1e-6}},
    {"test_blackmanwindow_symmetric", {1e-3, 1e-6}},
    {"test_hammingwindow", {1e-3, 1e-6}},
    {"test_hammingwindow_symmetric", {1e-3, 1e-6}},
    {"test_hannwindow", {1e-3, 1e-6}},
    {"test_hannwindow_symmetric", {1e-3, 1e-6}},
    {"test_blackmanwindow_expanded", {1e-3, 1e-6}},
    {"test_blackmanwindow_symmetric_expanded", {1e-3, 1e-6}},
    {"test_hammingwindow_expanded", {1e-3, 1e-6}},
    {"test_hammingwindow_symmetric_expanded", {1e-3, 1e-6}},
    {"test_hannwindow_expanded", {1e-3, 1e-6}},
    {"test_hannwindow_symmetric_expanded", {1e-3, 1e-6}},
    // ONNX 1.12's generator truncates float32 to bfloat16; pipetrain rounds to
    // nearest even (as onnxruntime and later ONNX do): one bfloat16 ulp apart.
    {"test_cast_FLOAT_to_BFLOAT16", {1.0 / 128, 0}},
    {"test_castlike_FLOAT_to_BFLOAT16", {1.0 / 128, 0}},
    {"test_castlike_FLOAT_to_BFLOAT16_expanded", {1.0 / 128, 0}},
};

enum class Verdict { kPass, kFail, kSkip };
struct Outcome {
  Verdict verdict;
  std::string detail;  // skip reason or failure message
};

// "backend 'cpu' cannot run:\n  Add node 'a': the CPU kernel ... dtype i32" -> "the CPU kernel ...
// dtype i32": the part of the last line after the node's name, so skips group by cause.
std::string short_reason(const std::string& what) {
  std::string line =
      what.substr(what.find_last_of('\n') == std::string::npos ? 0 : what.find_last_of('\n') + 1);
  size_t dt = line.find("has dtype ");
  if (dt !=
      std::string::npos) {  // "<file>: tensor 'x' has dtype uint8, which ..." -> "dtype uint8"
    std::string t = line.substr(dt + 10);
    return "dtype " + t.substr(0, t.find_first_of(", "));
  }
  size_t cut = line.rfind("': ");
  return cut == std::string::npos ? line : line.substr(cut + 3);
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<std::string> op_types(const onnx::ModelProto& m) {
  std::set<std::string> ops;
  for (const auto& n : m.graph().node()) ops.insert(importer::detail::ir_op_type(n));
  return {ops.begin(), ops.end()};
}

bool is_integer(int t) {
  return t == onnx::TensorProto::INT64 || t == onnx::TensorProto::INT32;
}

// ONNX 1.12's bfloat16 cases store their data as uint16 tensors of the same
// bits (its generator's workaround); read them as the bfloat16 the model declares.
void as_declared_bf16(onnx::TensorProto* tp, const onnx::ValueInfoProto& declared) {
  if (tp->data_type() == onnx::TensorProto::UINT16 && declared.type().has_tensor_type() &&
      declared.type().tensor_type().elem_type() == onnx::TensorProto::BFLOAT16)
    tp->set_data_type(onnx::TensorProto::BFLOAT16);
}

Outcome compare(const ir::Tensor& got, const ir::Tensor& want, const std::string& name, double rtol,
                double atol) {
  if (got.shape() != want.shape())
    return {Verdict::kFail, name + ": shape " + ir::shape_str(got.shape()) + ", expected " +
                                ir::shape_str(want.shape())};
  bool exact = !ir::is_float(want.dtype());
  double worst = 0;
  int64_t worst_i = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double g = got.at(i), w = want.at(i);
    double err;
    if (std::isnan(w) || std::isnan(g)) {
      err = std::isnan(w) == std::isnan(g) ? 0 : 1e30;
    } else if (std::isinf(w) || std::isinf(g)) {
      err = g == w ? 0 : 1e30;
    } else {
      err = exact ? (g == w ? 0 : 1e30) : std::abs(g - w) / (atol + rtol * std::abs(w));
    }
    if (err > worst) {
      worst = err;
      worst_i = i;
    }
  }
  if (worst > 1.0) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s: element %lld is %.8g, expected %.8g", name.c_str(),
                  static_cast<long long>(worst_i), got.at(worst_i), want.at(worst_i));
    return {Verdict::kFail, buf};
  }
  return {Verdict::kPass, ""};
}

Outcome run_case(const fs::path& dir) {
  onnx::ModelProto model;
  if (!model.ParseFromString(read_file(dir / "model.onnx")))
    return {Verdict::kFail, "model.onnx does not parse"};
  const std::string name = dir.filename().string();
  if (kRandomCases.count(name))
    return {Verdict::kSkip, "mask drawn from NumPy's RNG (not reproducible)"};
  if (name == "test_adam_multiple") {
    // ONNX 1.12's generator computed the expected outputs with epsilon 1e-2
    // but left the attribute off the node; the case runs with it restored.
    auto* eps = model.mutable_graph()->mutable_node(0)->add_attribute();
    eps->set_name("epsilon");
    eps->set_type(onnx::AttributeProto::FLOAT);
    eps->set_f(1e-2f);
  }
  for (const auto& op : op_types(model))
    if (!ir::OpRegistry::instance().find(op) && !importer::expanded_ops().count(op))
      return {Verdict::kSkip, "op " + op + " is not supported"};
  for (const auto* list : {&model.graph().input(), &model.graph().output()})
    for (const auto& vi : *list)
      if (!vi.type().has_tensor_type())
        return {Verdict::kSkip, "a graph input or output is a sequence or optional"};

  // Inputs that are not initializers, in order; they pair with input_<i>.pb.
  std::set<std::string> inits;
  for (const auto& t : model.graph().initializer()) inits.insert(t.name());
  std::vector<int> real_inputs;  // indices into graph().input()
  for (int i = 0; i < model.graph().input_size(); ++i)
    if (!inits.count(model.graph().input(i).name())) real_inputs.push_back(i);

  // Float and bool inputs that decide an output shape: Resize's roi (1) and
  // scales (2), Upsample's scales (1), Compress's condition (1).
  std::set<std::string> shape_floats;
  for (const auto& node : model.graph().node()) {
    if (node.op_type() == "Resize")
      for (int k : {1, 2})
        if (node.input_size() > k) shape_floats.insert(node.input(k));
    if ((node.op_type() == "Compress" || node.op_type() == "Upsample") && node.input_size() > 1)
      shape_floats.insert(node.input(1));
  }

  int case_count = 0;
  for (; fs::exists(dir / ("test_data_set_" + std::to_string(case_count))); ++case_count) {
  }
  bool imports_default_domain = false;  // the optimizer tests import only the training domain
  for (const auto& o : model.opset_import())
    imports_default_domain |= o.domain().empty() || o.domain() == "ai.onnx";
  if (case_count == 0) return {Verdict::kSkip, "no test data"};
  std::string ops_of_case;
  for (const auto& op : op_types(model)) ops_of_case += (ops_of_case.empty() ? "" : "+") + op;

  for (int set = 0; set < case_count; ++set) {
    fs::path data = dir / ("test_data_set_" + std::to_string(set));
    onnx::ModelProto frozen = model;
    std::map<std::string, ir::Tensor> feeds;
    std::vector<onnx::TensorProto> constants;
    for (size_t i = 0; i < real_inputs.size(); ++i) {
      fs::path pb = data / ("input_" + std::to_string(i) + ".pb");
      if (!fs::exists(pb)) continue;  // optional input left out
      onnx::TensorProto tp;
      if (!tp.ParseFromString(read_file(pb))) return {Verdict::kFail, pb.string() + " unreadable"};
      const std::string& in_name = model.graph().input(real_inputs[i]).name();
      as_declared_bf16(&tp, model.graph().input(real_inputs[i]));
      if (tp.dims_size() == 0 && !is_integer(tp.data_type()) && imports_default_domain) {
        // A float scalar (Range's bounds) becomes a Constant node, not an
        // initializer, which pipetrain would import as a trainable weight:
        // the expanded Range computes its Loop's trip count from them.
        tp.set_name(in_name);
        constants.push_back(tp);
        continue;
      }
      if (is_integer(tp.data_type()) || shape_floats.count(in_name)) {  // shapes, axes, scales
        tp.set_name(in_name);
        *frozen.mutable_graph()->add_initializer() = tp;
        continue;
      }
      try {
        feeds[in_name] = importer::detail::tensor_from_proto(tp, data.string(), pb.string());
      } catch (const UnsupportedOp& e) {
        return {Verdict::kSkip, ops_of_case + ": " + short_reason(e.what())};
      }
      // Bind the model's declared input shape to the data's (some test models
      // leave dims symbolic).
      auto* shape = frozen.mutable_graph()
                        ->mutable_input(real_inputs[i])
                        ->mutable_type()
                        ->mutable_tensor_type()
                        ->mutable_shape();
      shape->clear_dim();
      for (int64_t d : feeds[in_name].shape()) shape->add_dim()->set_dim_value(d);
    }
    if (!constants.empty()) {  // the Constant nodes first, their names no longer inputs
      auto* g = frozen.mutable_graph();
      google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
      std::set<std::string> names;
      for (const auto& tp : constants) {
        onnx::NodeProto* c = nodes.Add();
        c->set_op_type("Constant");
        c->add_output(tp.name());
        auto* value = c->add_attribute();
        value->set_name("value");
        value->set_type(onnx::AttributeProto::TENSOR);
        *value->mutable_t() = tp;
        names.insert(tp.name());
      }
      for (const auto& n : g->node()) *nodes.Add() = n;
      g->mutable_node()->Swap(&nodes);
      google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
      for (const auto& vi : g->input())
        if (!names.count(vi.name())) *kept.Add() = vi;
      g->mutable_input()->Swap(&kept);
    }
    std::string bytes;
    frozen.SerializeToString(&bytes);

    // Import without folding first, so every op runs through its kernel; a
    // model whose shapes come from Shape nodes (the *_expanded function
    // bodies) needs the importer's folding of static shape subgraphs.
    ir::Graph g;
    for (bool fold : {false, true}) {
      importer::ImportOptions opts;
      opts.fold_constants = fold;
      try {
        g = importer::import_model_bytes(bytes, dir.string(), opts);
        break;
      } catch (const UnsupportedOp& e) {
        // A Loop trip count computed from constants (the expanded Range) needs folding.
        if (fold || std::string(e.what()).find("is not a constant") == std::string::npos)
          return {Verdict::kSkip, ops_of_case + ": " + short_reason(e.what())};
      } catch (const std::exception& e) {
        bool needs_folding = std::string(e.what()).find("must be a constant") != std::string::npos;
        if (fold || !needs_folding) return {Verdict::kFail, std::string("import: ") + e.what()};
      }
    }
    std::map<std::string, ir::Tensor> outs;
    try {
      auto backend = exec::make_cpu_backend();
      exec::ForwardRunner runner(g, *backend);
      outs = runner.run(feeds);
    } catch (const UnsupportedOp& e) {
      return {Verdict::kSkip, ops_of_case + ": " + short_reason(e.what())};
    } catch (const std::exception& e) {
      return {Verdict::kFail, std::string("run: ") + e.what()};
    }
    auto tol = kLooserTolerance.count(name) ? kLooserTolerance.at(name)
                                            : std::pair<double, double>{1e-4, 1e-5};
    for (int k = 0; k < model.graph().output_size(); ++k) {
      fs::path pb = data / ("output_" + std::to_string(k) + ".pb");
      if (!fs::exists(pb)) continue;
      const std::string& out_name = model.graph().output(k).name();
      ir::Tensor want;
      try {
        onnx::TensorProto tp;
        if (!tp.ParseFromString(read_file(pb)))
          return {Verdict::kFail, pb.string() + " unreadable"};
        as_declared_bf16(&tp, model.graph().output(k));
        want = importer::detail::tensor_from_proto(tp, data.string(), pb.string());
      } catch (const UnsupportedOp& e) {
        return {Verdict::kSkip, ops_of_case + ": " + short_reason(e.what())};
      }
      if (!outs.count(out_name)) return {Verdict::kFail, "output " + out_name + " missing"};
      Outcome c = compare(outs.at(out_name), want, out_name, tol.first, tol.second);
      if (c.verdict != Verdict::kPass) return c;
    }
  }
  return {Verdict::kPass, ""};
}

// Runs one case in a child process; returns its outcome through a pipe.
Outcome run_isolated(const fs::path& dir) {
  int fds[2];
  if (pipe(fds) != 0) return run_case(dir);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    alarm(kTimeoutSeconds);
    Outcome o;
    try {
      o = run_case(dir);
    } catch (const std::exception& e) {
      o = {Verdict::kFail, std::string("exception: ") + e.what()};
    }
    std::string msg = std::to_string(static_cast<int>(o.verdict)) + o.detail;
    ssize_t w = write(fds[1], msg.data(), msg.size());
    (void)w;
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  ssize_t r;
  while ((r = read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(r));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (msg.empty()) {
    if (WIFSIGNALED(status))
      return {Verdict::kFail, "crashed with signal " + std::to_string(WTERMSIG(status)) +
                                  (WTERMSIG(status) == SIGALRM ? " (timeout)" : "")};
    return {Verdict::kFail, "child exited without a result"};
  }
  return {static_cast<Verdict>(msg[0] - '0'), msg.substr(1)};
}

}  // namespace

int main(int argc, char** argv) {
  // Optional: --min-passed N (fewer passes fail the run: a case that slips
  // from pass to skip is a regression too), then a substring of the case name.
  int min_passed = 0;
  if (argc > 2 && std::string(argv[1]) == "--min-passed") {
    min_passed = std::atoi(argv[2]);
    argv += 2;
    argc -= 2;
  }
  std::string filter = argc > 1 ? argv[1] : "";
  bool verbose = std::getenv("PIPETRAIN_CONFORMANCE_VERBOSE") != nullptr;
  std::vector<fs::path> cases;
  for (const char* sub : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    fs::path root = fs::path(kDataRoot) / sub;
    if (!fs::exists(root)) continue;
    for (const auto& e : fs::directory_iterator(root))
      if (fs::exists(e.path() / "model.onnx") &&
          e.path().filename().string().find(filter) != std::string::npos)
        cases.push_back(e.path());
  }
  std::sort(cases.begin(), cases.end());
  if (cases.empty()) {
    std::printf("no ONNX test data under %s (install libonnx-testdata)\n", kDataRoot);
    return 1;
  }
  int passed = 0, failed = 0, skipped = 0;
  std::map<std::string, std::vector<std::string>> skipped_by_reason;
  std::vector<std::string> failures;
  auto t0 = std::chrono::steady_clock::now();
  for (const auto& dir : cases) {
    Outcome o = run_isolated(dir);
    std::string rel = dir.parent_path().filename().string() + "/" + dir.filename().string();
    switch (o.verdict) {
      case Verdict::kPass:
        ++passed;
        if (verbose) std::printf("PASS %s\n", rel.c_str());
        break;
      case Verdict::kFail:
        ++failed;
        failures.push_back(rel + ": " + o.detail);
        std::printf("FAIL %s: %s\n", rel.c_str(), o.detail.c_str());
        break;
      case Verdict::kSkip: {
        ++skipped;
        std::string reason = o.detail.substr(0, o.detail.find('\n'));
        if (reason.size() > 160) reason = reason.substr(0, 160) + "...";
        skipped_by_reason[reason].push_back(dir.filename().string());
        if (verbose) std::printf("SKIP %s: %s\n", rel.c_str(), reason.c_str());
        break;
      }
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\nskipped cases, by reason:\n");
  std::vector<std::pair<std::string, std::vector<std::string>>> groups(skipped_by_reason.begin(),
                                                                       skipped_by_reason.end());
  std::sort(groups.begin(), groups.end(),
            [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  for (const auto& [reason, names] : groups) {
    std::printf("  %3zu  %s", names.size(), reason.c_str());
    if (names.size() <= 3) {
      std::printf("  [");
      for (size_t i = 0; i < names.size(); ++i)
        std::printf("%s%s", i ? ", " : "", names[i].c_str());
      std::printf("]");
    }
    std::printf("\n");
  }
  std::printf("\nONNX conformance (%zu cases, %.1f s)\n", cases.size(), secs);
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  if (passed < min_passed)
    std::printf("FAILED: %d passed, fewer than the %d this tree passed before\n", passed,
                min_passed);
  return failed == 0 && passed >= min_passed ? 0 : 1;
}
