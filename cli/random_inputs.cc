#include "cli/random_inputs.h"

#include "autodiff/training_graph.h"
#include "ir/error.h"

namespace pipetrain::cli {

ir::Tensor random_input(const ir::TensorDesc& d, std::mt19937_64& rng, const std::string& command) {
  ir::Tensor t(d.dtype, d.shape);
  if (d.dtype == ir::DType::kF32) {
    std::normal_distribution<float> dist(0.f, 1.f);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  } else if (d.dtype == ir::DType::kI64) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = int64_t(rng() % 2);
  } else if (d.dtype != ir::DType::kBool) {
    throw ModelError(command + " cannot fill input '" + d.name + "' of dtype " +
                     ir::dtype_name(d.dtype));
  }
  return t;
}

}  // namespace pipetrain::cli

namespace pipetrain::cli {

std::map<std::string, ir::Tensor> random_feeds(const ir::Graph& g, const std::string& command) {
  std::mt19937_64 rng(0);
  std::map<std::string, ir::Tensor> feeds;
  for (const auto& in : g.inputs)
    feeds[in] = in == autodiff::kLossWeight ? ir::Tensor::scalar_f32(1.0f)
                                            : random_input(g.tensor(in), rng, command);
  return feeds;
}

}  // namespace pipetrain::cli
