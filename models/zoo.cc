// The zoo's registry: entries, dispatch by name, writing and counting.
#include "models/zoo.h"

#include "importer/model_file.h"
#include "ir/error.h"
#include "models/builders.h"

namespace pipetrain::models {

namespace {

using BuildFn = void (*)(OnnxBuilder&, const ZooOptions&);

struct Model {
  ZooEntry entry;
  BuildFn build;
};

const std::vector<Model>& models() {
  static const std::vector<Model> kModels = {
      {{"mlp",
        "MLP for sklearn digits: input (N, 64) -> Gemm 128, Relu -> Gemm 64, Relu -> logits "
        "(N, 10); --hidden widths, in_features and classes are options",
        17226, "computed: 64*128+128 + 128*64+64 + 64*10+10"},
       build_mlp},
      {{"lenet",
        "LeNet-5 style CNN for Fashion-MNIST: input (N, 1, 28, 28) -> conv5x5 16, relu, "
        "maxpool2 -> conv5x5 32, relu, maxpool2 -> fc 1568->128, relu -> logits (N, 10)",
        215370, "computed: 416 + 12,832 + 200,832 + 1,290"},
       build_lenet},
      {{"alexnet", "torchvision AlexNet: input (N, 3, 224, 224) -> logits (N, 1000)", 61100840,
        "torchvision.models.alexnet()"},
       build_alexnet},
      {{"vgg16", "torchvision VGG-16 (no batch norm): input (N, 3, 224, 224) -> logits (N, 1000)",
        138357544, "torchvision.models.vgg16()"},
       build_vgg16},
      {{"resnet50", "torchvision ResNet-50 (v1.5): input (N, 3, 224, 224) -> logits (N, 1000)",
        25557032, "torchvision.models.resnet50()"},
       build_resnet50},
      {{"gnmt",
        "GNMT-8 as in PipeDream (hidden 1024, vocab 32320): source, target (N, 50) int64 -> "
        "embeddings -> 8 encoder LSTMs (first bidirectional, residual from the 3rd) -> "
        "attention LSTM + normalized Bahdanau attention + 7 decoder LSTMs (residual from the "
        "2nd) -> logits (N, 50, 32320)",
        277718593,
        "derived from PipeDream's runtime/translation/models/gnmt_large (MLPerf GNMT "
        "modules, separate source and target embeddings)"},
       build_gnmt},
      {{"bert",
        "BERT-base (12 layers, hidden 768, 12 heads, FFN 3072, vocab 30522, 512 positions) with "
        "pooler and a sequence classifier: input_ids (N, 128) int64 -> logits (N, 2)",
        109482240,
        "HF bert-base-uncased BertModel incl. pooler; as built adds the classifier "
        "768*classes + classes"},
       build_bert},
      {{"gpt2",
        "GPT-2 small (12 layers, 768, 12 heads, vocab 50257, 1024 positions), LM head tied to "
        "the token embedding: input_ids (N, 1024) int64 -> logits (N, 1024, 50257)",
        124439808, "HF gpt2 (GPT2LMHeadModel, tied lm_head)"},
       build_gpt2},
  };
  return kModels;
}

const Model& find_model(const std::string& name) {
  for (const auto& m : models())
    if (m.entry.name == name) return m;
  std::string known;
  for (const auto& m : models()) known += (known.empty() ? "" : ", ") + m.entry.name;
  throw PlanError("unknown zoo model '" + name + "' (known: " + known + ")");
}

onnx::ModelProto build(const std::string& name, const ZooOptions& options, Values values,
                       int64_t* param_count) {
  const Model& m = find_model(name);
  if (options.batch < 0)
    throw ModelError(name + ": batch " + std::to_string(options.batch) +
                     " must be positive (or 0 for the symbolic \"N\")");
  if (options.width_divisor < 1 || 64 % options.width_divisor != 0)
    throw ModelError(name + ": width_divisor " + std::to_string(options.width_divisor) +
                     " must divide 64 (1, 2, 4, ..., 64)");
  OnnxBuilder b(name, options.seed, values);
  m.build(b, options);
  if (param_count) *param_count = b.param_count();
  return b.finish();
}

}  // namespace

int64_t option_or(const char* model, const char* option, int64_t value, int64_t fallback,
                  int64_t min) {
  int64_t v = value == 0 ? fallback : value;
  if (v < min)
    throw ModelError(std::string(model) + ": " + option + " " + std::to_string(v) +
                     " must be >= " + std::to_string(min));
  return v;
}

const std::vector<ZooEntry>& zoo_entries() {
  static const std::vector<ZooEntry> kEntries = [] {
    std::vector<ZooEntry> v;
    for (const auto& m : models()) v.push_back(m.entry);
    return v;
  }();
  return kEntries;
}

const ZooEntry& zoo_entry(const std::string& name) {
  return find_model(name).entry;
}

onnx::ModelProto build_zoo_model(const std::string& name, const ZooOptions& options) {
  return build(name, options, options.weights ? Values::kDrawn : Values::kZeros, nullptr);
}

int64_t zoo_param_count(const std::string& name, const ZooOptions& options) {
  int64_t count = 0;
  build(name, options, Values::kNone, &count);
  return count;
}

void write_zoo_model(const std::string& name, const ZooOptions& options, const std::string& path) {
  importer::write_model_file(build_zoo_model(name, options), path);
}

}  // namespace pipetrain::models
