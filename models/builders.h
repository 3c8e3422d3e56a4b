// The zoo's builders, one per model: each writes its graph into `b` (inputs,
// nodes, parameters, outputs). Internal to models/; zoo.cc dispatches.
#pragma once

#include <cstdint>
#include <string>

#include "models/onnx_builder.h"
#include "models/zoo.h"

namespace pipetrain::models {

// vision.cc
void build_mlp(OnnxBuilder& b, const ZooOptions& o);
void build_lenet(OnnxBuilder& b, const ZooOptions& o);
void build_alexnet(OnnxBuilder& b, const ZooOptions& o);
void build_vgg16(OnnxBuilder& b, const ZooOptions& o);
void build_resnet50(OnnxBuilder& b, const ZooOptions& o);
// gnmt.cc
void build_gnmt(OnnxBuilder& b, const ZooOptions& o);
// transformer.cc
void build_bert(OnnxBuilder& b, const ZooOptions& o);
void build_gpt2(OnnxBuilder& b, const ZooOptions& o);

/// `value`, or `fallback` when it is 0; ModelError naming the model and the
/// option when the result is below `min`.
int64_t option_or(const char* model, const char* option, int64_t value, int64_t fallback,
                  int64_t min = 1);

}  // namespace pipetrain::models
