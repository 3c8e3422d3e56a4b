// libFuzzer target: a checkpoint file, as `train --resume` reads it: loaded
// (checksum verified), restored into a model, its plan metadata parsed.
#include "fuzz/fuzz_input.h"
#include "importer/checkpoint.h"
#include "ir/graph.h"
#include "partitioner/json_util.h"
#include "partitioner/plan.h"

namespace {

// The model the seed checkpoints were written from: w (3, 2) and b (2).
pipetrain::ir::Graph model() {
  using pipetrain::ir::DType;
  pipetrain::ir::Graph g;
  g.set_value("w", pipetrain::ir::Tensor(DType::kF32, {3, 2}), pipetrain::ir::Role::kParam);
  g.set_value("b", pipetrain::ir::Tensor(DType::kF32, {2}), pipetrain::ir::Role::kParam);
  return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace pt = pipetrain;
  const std::string path = pt::fuzz::input_file(data, size, "checkpoint.onnx");
  pt::fuzz::expect_clean([&] {
    pt::importer::Checkpoint c = pt::importer::load_checkpoint(path);
    pt::ir::Graph g = model();
    pt::importer::restore_checkpoint(c, g, path);
    if (auto it = c.meta.find("plan"); it != c.meta.end())
      pt::partitioner::plan_from_json(pt::partitioner::json_util::parse(it->second, path));
  });
  return 0;
}
