#include "cli/model_options.h"

#include <sstream>

#include "ir/error.h"

namespace pipetrain::cli {

void ModelOptions::add_to(CLI::App& cmd, bool model_required) {
  cmd.add_option("model", path, "ONNX model file")
      ->required(model_required)
      ->check(CLI::ExistingFile);
  cmd.add_option("--batch", batch, "Bind the symbolic leading (batch) dimension of the inputs")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--input-shape", input_shapes, "Static shape of an input: NAME=d0,d1,...");
  cmd.add_option("--layer-depth", layer_depth,
                 "Group nodes into layers by the first K scopes of their names (0: one node "
                 "per layer)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_flag("--no-fuse", no_fuse,
               "Run the graph as the file has it: no fused GELU, weight GEMMs or dropped idle "
               "Dropouts; with `run`, activations row-major between convolutions too (for "
               "debugging)");
}

void ModelOptions::resolve_batch() {
  if (batch > 0) return;
  ir::Graph g;
  try {
    g = importer::import_model(path, import_options());
  } catch (const ModelError& e) {
    throw ModelError("--batch is required (" + std::string(e.what()) + ")");
  }
  for (const auto& name : g.inputs) {
    const ir::Shape& s = g.tensor(name).shape;
    if (s.empty() || s[0] <= 0)
      throw ModelError("--batch is required: input '" + name + "' has no fixed leading dimension");
    if (batch > 0 && s[0] != batch)
      throw ModelError("--batch is required: the inputs' leading dimensions differ ('" + name +
                       "' has " + std::to_string(s[0]) + ", another " + std::to_string(batch) +
                       ")");
    batch = s[0];
  }
  if (batch <= 0) throw ModelError("--batch is required and must be positive");
}

importer::ImportOptions ModelOptions::import_options() const {
  importer::ImportOptions o;
  if (batch > 0) o.batch = batch;
  o.layer_depth = layer_depth;
  o.half_as_float32 = half_as_float32;
  o.fuse = !no_fuse;
  for (const auto& spec : input_shapes) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ModelError("--input-shape '" + spec + "': expected NAME=d0,d1,...");
    ir::Shape shape;
    std::stringstream ss(spec.substr(eq + 1));
    std::string tok;
    while (std::getline(ss, tok, ',')) {
      try {
        shape.push_back(std::stoll(tok));
      } catch (const std::exception&) {
        throw ModelError("--input-shape '" + spec + "': '" + tok + "' is not a dimension");
      }
      if (shape.back() <= 0)
        throw ModelError("--input-shape '" + spec + "': dimensions must be positive");
    }
    o.input_shapes[spec.substr(0, eq)] = shape;
  }
  return o;
}

}  // namespace pipetrain::cli
