// Checkpoints: a trainer's state as one ONNX file, independent of how the
// model was cut into stages. Every param, buffer and optimizer-state value is
// an initializer under its training-graph name ("fc.weight",
// "fc.weight.momentum"), and where the run stood (step, epoch, seed, ...)
// is in metadata_props. Written atomically (temporary file, then rename).
#pragma once

#include <map>
#include <string>

#include "ir/graph.h"

namespace pipetrain::importer {

struct Checkpoint {
  std::map<std::string, ir::Tensor> values;  // name -> value
  std::map<std::string, ir::Role> roles;     // kParam, kBuffer or kOptimizerState
  std::map<std::string, std::string> meta;
};

/// Writes the params, buffers and optimizer state of `g` with `meta`.
void save_checkpoint(const std::string& path, const ir::Graph& g,
                     const std::map<std::string, std::string>& meta);

/// Reads a checkpoint; ModelError naming the file when it is not one.
Checkpoint load_checkpoint(const std::string& path);

/// Puts the checkpoint's values into g: params and buffers must exist in g
/// with the same shape (ModelError naming the value otherwise), optimizer
/// state is added. Values of g missing from the checkpoint are an error too.
void restore_checkpoint(const Checkpoint& c, ir::Graph& g, const std::string& path);

}  // namespace pipetrain::importer
