// The model zoo: builders that write ONNX models (opset 17, ir_version 8)
// with PyTorch-like node names ("/layer1/layer1.0/conv1/Conv"), so the
// importer's layering groups them into modules, and weights initialised like
// the reference implementation of each model from one seed.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pipetrain::models {

/// Knobs of the builders. A value of 0 means "the model's default" (shown in
/// `zoo_entries()` descriptions); knobs a model does not have are ignored.
struct ZooOptions {
  /// Leading dimension of every input; 0 writes the symbolic dimension "N",
  /// bound later by the importer's batch option (`--batch`).
  int64_t batch = 0;
  /// Classifier outputs: mlp/lenet 10, alexnet/vgg16/resnet50 1000, bert 2.
  int64_t num_classes = 0;
  /// Square image side: lenet 28, alexnet/vgg16/resnet50 224.
  int64_t image_size = 0;
  /// Image channels: lenet 1, others 3.
  int64_t channels = 0;
  /// mlp: input features and hidden widths (one Gemm + Relu per width).
  int64_t in_features = 64;
  std::vector<int64_t> hidden = {128, 64};
  /// Tokens per sequence: gnmt 50 (source and target), bert 128, gpt2 1024.
  int64_t seq_len = 0;
  /// Divides every width of alexnet, vgg16, resnet50, gnmt, bert and gpt2
  /// (channels, hidden sizes, FFN, vocabularies; not classes, heads or
  /// positions) by this: same graph at a fraction of the size, for quick runs
  /// and tests. 1 is the published architecture; must divide 64.
  int64_t width_divisor = 1;
  /// bert and gpt2: transformer blocks (default 12) and vocabulary size
  /// (default the published one divided by width_divisor).
  int64_t num_layers = 0;
  int64_t vocab_size = 0;
  /// vgg16: a BatchNorm after every convolution (torchvision's vgg16_bn,
  /// 138,365,992 parameters at the defaults).
  bool batch_norm = false;
  /// Seeds the one std::mt19937_64 every parameter is drawn from, in order.
  uint64_t seed = 0;
  /// false: parameters that would be drawn at random are written as zeros
  /// (constant-initialised ones, such as norm scales, keep their value).
  /// Same graph, names and shapes, built in the time of a memset: for
  /// partitioning, profiling and parameter counts of the large models.
  bool weights = true;
};

struct ZooEntry {
  std::string name;
  std::string description;  // architecture and default inputs/outputs
  /// The figure published for the architecture at default options, or, where
  /// none is published, the count derived from the reference implementation
  /// (`source` says which).
  int64_t published_params;
  std::string source;
};

/// Every model the zoo builds, in presentation order.
const std::vector<ZooEntry>& zoo_entries();

/// The entry named `name`; PlanError listing the known names otherwise.
const ZooEntry& zoo_entry(const std::string& name);

/// Builds the model. PlanError for an unknown name, ModelError for options
/// the model cannot take (naming the option and the value).
onnx::ModelProto build_zoo_model(const std::string& name, const ZooOptions& options);

/// Builds and writes the model to `path` through a temporary file and a
/// rename, so a failure never leaves a half-written file (ModelError naming
/// the path).
void write_zoo_model(const std::string& name, const ZooOptions& options, const std::string& path);

/// Trainable parameters of the model as built with `options` (counted while
/// building it without weight values).
int64_t zoo_param_count(const std::string& name, const ZooOptions& options);

}  // namespace pipetrain::models
