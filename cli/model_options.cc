#include "cli/model_options.h"

#include <sstream>

#include "ir/error.h"

namespace pipetrain::cli {

void ModelOptions::add_to(CLI::App& cmd) {
  cmd.add_option("model", path, "ONNX model file")->required()->check(CLI::ExistingFile);
  cmd.add_option("--batch", batch, "Bind the symbolic leading (batch) dimension of the inputs")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--input-shape", input_shapes, "Static shape of an input: NAME=d0,d1,...");
  cmd.add_option("--layer-depth", layer_depth,
                 "Group nodes into layers by the first K scopes of their names (0: one node "
                 "per layer)")
      ->check(CLI::NonNegativeNumber);
}

importer::ImportOptions ModelOptions::import_options() const {
  importer::ImportOptions o;
  if (batch > 0) o.batch = batch;
  o.layer_depth = layer_depth;
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
