// `pipetrain inspect model.onnx`: what the model is, as pipetrain sees it;
// `pipetrain inspect --ops`: what pipetrain runs (op_coverage.cc).
#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/op_coverage.h"
#include "ir/cost.h"
#include "ir/error.h"
#include "ir/graph.h"

namespace pipetrain::cli {

namespace {

std::string human(double v, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T"};
  int p = 0;
  while (std::abs(v) >= 1000 && p < 4) {
    v /= 1000;
    ++p;
  }
  return fmt::format("{:.2f} {}{}", v, prefixes[p], unit);
}

std::string tensor_line(const ir::Graph& g, const std::string& name) {
  const auto& d = g.tensor(name);
  return fmt::format("  {:<24} {:<5} {}", name, ir::dtype_name(d.dtype), ir::shape_str(d.shape));
}

// The model at --batch, or at batch 1 when --batch is not given and the
// model leaves its leading dimension dynamic (said on a line of its own).
ir::Graph import_for_inspect(const ModelOptions& mo) {
  try {
    return importer::import_model(mo.path, mo.import_options());
  } catch (const ModelError& e) {
    if (mo.batch > 0) throw;
    ModelOptions one = mo;
    one.batch = 1;
    ir::Graph g;
    try {
      g = importer::import_model(one.path, one.import_options());
    } catch (const ModelError&) {
      throw e;  // not (only) the batch: the first reason stands
    }
    fmt::print("batch: the model leaves its leading dimension dynamic; shown at batch 1 (pass "
               "--batch N for another)\n");
    return g;
  }
}

void inspect(const ModelOptions& mo) {
  ir::Graph g = import_for_inspect(mo);
  auto stats = ir::layer_stats(g);
  fmt::print("model {} (graph '{}', opset {}): {} nodes, {} layers, {} parameters\n", mo.path,
             g.name, g.opset, g.nodes.size(), g.layers.size(), human(double(g.param_count()), ""));
  fmt::print("inputs:\n");
  for (const auto& in : g.inputs) fmt::print("{}\n", tensor_line(g, in));
  fmt::print("outputs:\n");
  for (const auto& out : g.outputs) fmt::print("{}\n", tensor_line(g, out));

  fmt::print("layers{}:\n", mo.layer_depth ? fmt::format(" (scope depth {})", mo.layer_depth)
                                           : std::string(" (one node per layer)"));
  fmt::print("  {:>4}  {:<36} {:>5}  {:>12}  {:>13}  {:>12}\n", "#", "layer", "nodes", "params",
             "FLOPs", "activations");
  int64_t params = 0, flops = 0, act = 0;
  for (size_t l = 0; l < stats.size(); ++l) {
    const auto& s = stats[l];
    std::string name = s.name.size() > 36 ? "..." + s.name.substr(s.name.size() - 33) : s.name;
    fmt::print("  {:>4}  {:<36} {:>5}  {:>12}  {:>13}  {:>12}\n", l, name, s.num_nodes, s.params,
               human(double(s.flops), "FLOP"), human(double(s.activation_bytes), "B"));
    params += s.params;
    flops += s.flops;
    act += s.activation_bytes;
  }
  fmt::print("  {:>4}  {:<36} {:>5}  {:>12}  {:>13}  {:>12}\n", "", "total", g.nodes.size(), params,
             human(double(flops), "FLOP"), human(double(act), "B"));
  int64_t param_bytes = 0;
  for (const auto& name : g.params()) param_bytes += int64_t(g.tensor(name).nbytes());
  fmt::print("parameter memory {}, forward {} per batch\n", human(double(param_bytes), "B"),
             human(double(flops), "FLOP"));
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("inspect",
                         "Describe a model: inputs, outputs, layers with parameters, FLOPs and "
                         "activation bytes; lists every unsupported op at once");
  auto mo = std::make_shared<ModelOptions>();
  mo->add_to(*cmd, false);
  auto ops = std::make_shared<bool>(false);
  cmd->add_flag("--ops", *ops,
                "Print the operator coverage table (op, first opset, gradient, device kernel, CPU "
                "dtypes) instead");
  cmd->callback([mo, ops] {
    if (*ops) return print_op_coverage();
    if (mo->path.empty()) throw CLI::RequiredError("model (or --ops)");
    inspect(*mo);
  });
}

}  // namespace pipetrain::cli
