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
  /// float16 / bfloat16 models as float32 (set by train: float32 master weights).
  bool half_as_float32 = false;
  bool no_fuse = false;  // --no-fuse: the graph as the file has it (for debugging)

  /// model_required = false: the command has another use without a model (inspect --ops).
  void add_to(CLI::App& cmd, bool model_required = true);
  importer::ImportOptions import_options() const;
  /// When --batch is not given: the leading dimension the model's inputs fix
  /// (a model exported with static shapes); ModelError asking for --batch
  /// when an input leaves it symbolic or the inputs disagree.
  void resolve_batch();
};

}  // namespace pipetrain::cli
