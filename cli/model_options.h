// Options every subcommand that loads a model shares: --batch, --input-shape,
// --layer-depth. Parsed into importer::ImportOptions.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "importer/importer.h"

namespace pipetrain::cli {

struct ModelOptions {
  std::string path;
  int64_t batch = 0;                      // 0: not given
  std::vector<std::string> input_shapes;  // NAME=d0,d1,...
  int layer_depth = 0;

  void add_to(CLI::App& cmd);
  importer::ImportOptions import_options() const;
};

}  // namespace pipetrain::cli
