// Writing an ONNX ModelProto to disk: the one place pipetrain does it
// (exported graphs, trained models, zoo models).
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

namespace pipetrain::importer {

/// Serializes `model` to a temporary file beside `path` and renames it into
/// place, so a failure never leaves a half-written file. ModelError naming
/// the path when the model is over protobuf's 2 GiB or cannot be written.
void write_model_file(const onnx::ModelProto& model, const std::string& path);

}  // namespace pipetrain::importer
