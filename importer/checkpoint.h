// Checkpoints: a trainer's state as one ONNX file, independent of how the
// model was cut into stages. Every param, buffer and optimizer-state value is
// an initializer under its training-graph name ("fc.weight",
// "fc.weight.momentum"), and where the run stood (step, epoch, seed, ...)
// is in metadata_props. Written atomically (temporary file, then rename), with
// a CRC-32 of the contents that loading verifies: a file damaged on disk is
// refused, never trained from.
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

/// The params, buffers and optimizer state of `g` with `meta`; `copy`: the values are copies
/// (a snapshot another thread may write while training goes on), else shared with `g`.
Checkpoint checkpoint_of(const ir::Graph& g, const std::map<std::string, std::string>& meta,
                         bool copy);

/// Writes `c` with a CRC-32 of its contents (names, shapes, bytes, metadata), renamed into
/// place. ModelError naming the path when it cannot be written.
void write_checkpoint(const Checkpoint& c, const std::string& path);

/// Reads a checkpoint and verifies its CRC-32 (files from before checksums have none); ModelError
/// naming the file when it is not one, is truncated, or changed after it was written.
Checkpoint load_checkpoint(const std::string& path);

/// Puts the checkpoint's values into g: params and buffers must exist in g
/// with the same shape (ModelError naming the value otherwise), optimizer
/// state is added. Values of g missing from the checkpoint are an error too.
void restore_checkpoint(const Checkpoint& c, ir::Graph& g, const std::string& path);

}  // namespace pipetrain::importer
