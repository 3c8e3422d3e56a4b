// `pipetrain run model.onnx --input x=x.npy --output-dir out/`: one forward pass.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <random>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/op_time_table.h"
#include "cli/random_inputs.h"
#include "data/npz.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "ir/cost.h"
#include "ir/error.h"
#include "ir/npy.h"

namespace pipetrain::cli {

namespace {

struct RunArgs {
  ModelOptions model;
  std::vector<std::string> inputs;  // NAME=file.npy
  std::string output_dir;
  bool random_inputs = false;
  uint64_t seed = 0;
  int threads = 1;
  int repeat = 1;
  bool training = false;
  bool profile = false;
};

std::string file_name_for(const std::string& tensor) {
  std::string s;
  for (char c : tensor)
    s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return s + ".npy";
}

std::map<std::string, ir::Tensor> named_arrays(const std::string& path) {
  if (std::filesystem::is_directory(path)) {
    std::map<std::string, ir::Tensor> out;
    for (const auto& e : std::filesystem::directory_iterator(path))
      if (e.is_regular_file() && e.path().extension() == ".npy")
        out[e.path().stem().string()] = ir::load_npy(e.path().string());
    if (out.empty()) throw ModelError(path + ": no NAME.npy arrays in this directory");
    return out;
  }
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".npz") == 0) return data::read_npz(path);
  throw ModelError("--input '" + path +
                   "': expected NAME=file.npy, an .npz or a directory of "
                   "NAME.npy files");
}

void run(const RunArgs& a) {
  // float16 / bfloat16 models run in float32 (not every CPU kernel has the
  // half types), as train runs them; inputs in the half type are widened.
  importer::ImportOptions options = a.model.import_options();
  options.half_as_float32 = true;
  options.inference = true;
  ir::Graph g = importer::import_model(a.model.path, options);
  std::map<std::string, ir::Tensor> feeds;
  for (const auto& spec : a.inputs) {
    size_t eq = spec.find('=');
    if (eq == 0) throw ModelError("--input '" + spec + "': expected NAME=file.npy");
    if (eq != std::string::npos) {
      feeds[spec.substr(0, eq)] = ir::load_npy(spec.substr(eq + 1));
      continue;
    }
    // Named arrays, as `train --data` takes them: an .npz or a directory of NAME.npy.
    for (auto& [name, t] : named_arrays(spec)) {
      if (std::find(g.inputs.begin(), g.inputs.end(), name) == g.inputs.end()) {
        std::string known;
        for (const auto& in : g.inputs) known += (known.empty() ? "" : ", ") + in;
        throw ModelError(spec + ": array '" + name +
                         "' is no input of the model (its inputs: " + known + ")");
      }
      feeds[name] = t;
    }
  }
  for (auto& [name, t] : feeds) {
    if (!g.has_tensor(name)) continue;
    const ir::DType want = g.tensor(name).dtype;
    const bool half_to_float =
        (t.dtype() == ir::DType::kF16 || t.dtype() == ir::DType::kBF16) && want == ir::DType::kF32;
    // .npy reads narrow integers (uint8 images, int16 ids) as i64; the model
    // computes them in i32 or i64 (importer/narrow_ints.cc).
    const bool int_to_int = (t.dtype() == ir::DType::kI64 || t.dtype() == ir::DType::kI32) &&
                            (want == ir::DType::kI64 || want == ir::DType::kI32) &&
                            t.dtype() != want;
    if (half_to_float) {
      ir::Tensor wide(ir::DType::kF32, t.shape());
      for (int64_t i = 0; i < t.numel(); ++i) wide.data<float>()[i] = static_cast<float>(t.at(i));
      t = std::move(wide);
    } else if (int_to_int) {
      ir::Tensor cast(want, t.shape());
      for (int64_t i = 0; i < t.numel(); ++i) {
        const int64_t v =
            t.dtype() == ir::DType::kI64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
        if (want == ir::DType::kI32 && (v < INT32_MIN || v > INT32_MAX))
          throw ModelError("input '" + name + "': element " + std::to_string(i) + " (" +
                           std::to_string(v) + ") does not fit the model's i32");
        if (want == ir::DType::kI32)
          cast.data<int32_t>()[i] = static_cast<int32_t>(v);
        else
          cast.data<int64_t>()[i] = v;
      }
      t = std::move(cast);
    }
  }
  std::mt19937_64 rng(a.seed);
  for (const auto& in : g.inputs)
    if (!feeds.count(in) && a.random_inputs)
      feeds[in] = random_input(g.tensor(in), rng, "--random-inputs");

  exec::set_cpu_threads(a.threads);
  exec::CpuBackendOptions cpu;
  cpu.blocked_layout = !a.model.no_fuse;
  auto backend = exec::make_cpu_backend(cpu);
  exec::ForwardRunner runner(g, *backend, /*plan_memory=*/true);
  exec::RunOptions opts;
  opts.training = a.training;
  opts.seed = a.seed;
  opts.values_version = exec::fresh_values_version();  // the weights stay put over the repeats
  std::map<std::string, ir::Tensor> outs;
  std::vector<double> ms, node_seconds;
  if (a.profile) opts.node_seconds = &node_seconds;
  for (int r = 0; r < a.repeat; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    outs = runner.run(feeds, opts);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  if (a.profile) print_profile(g, node_seconds, a.repeat);
  fmt::print("forward pass of {} on {} ({} thread{}): {:.2f} ms{}\n", a.model.path, backend->name(),
             a.threads, a.threads == 1 ? "" : "s", ms[ms.size() / 2],
             a.repeat > 1 ? fmt::format(" (median of {})", a.repeat) : "");
  if (!a.output_dir.empty()) std::filesystem::create_directories(a.output_dir);
  for (const auto& name : g.outputs) {
    const ir::Tensor& t = outs.at(name);
    double sum = 0;
    for (int64_t i = 0; i < t.numel(); ++i) sum += t.at(i);
    fmt::print("  {:<24} {:<5} {:<20} mean {:.6g}\n", name, ir::dtype_name(t.dtype()),
               ir::shape_str(t.shape()), t.numel() ? sum / double(t.numel()) : 0.0);
    if (!a.output_dir.empty()) {
      auto path = std::filesystem::path(a.output_dir) / file_name_for(name);
      ir::save_npy(t, path.string());
      fmt::print("    -> {}\n", path.string());
    }
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Run a model forward on the CPU (.npy in, .npy out)");
  auto a = std::make_shared<RunArgs>();
  a->model.add_to(*cmd);
  cmd->add_option("--input", a->inputs,
                  "Input values: NAME=file.npy, or an .npz / a directory of NAME.npy arrays "
                  "keyed by input name (repeatable)");
  cmd->add_option("--output-dir", a->output_dir, "Write every output as DIR/<name>.npy");
  cmd->add_flag("--random-inputs", a->random_inputs,
                "Fill inputs not given with seeded N(0,1) values (f32) or 0/1 (i64)");
  cmd->add_option("--seed", a->seed, "Seed for --random-inputs and random ops");
  cmd->add_option("--threads", a->threads, "CPU threads for BLAS and oneDNN")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--repeat", a->repeat, "Run N times and report the median time")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--training", a->training,
                "Run Dropout nodes without a training_mode input in training mode");
  cmd->add_flag("--profile", a->profile, "Print the time spent per op type");
  cmd->callback([a] { run(*a); });
}

}  // namespace pipetrain::cli
