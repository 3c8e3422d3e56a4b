#include "executor/pipeline/whole_minibatch.h"

#include <algorithm>
#include <cstring>

#include "autodiff/training_graph.h"
#include "ir/error.h"

namespace pipetrain::exec {

bool has_batch_statistics(const ir::Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(), [](const ir::Node& n) {
    return n.op_type == "BatchNormalization" && n.attr_int("training_mode", 0) != 0;
  });
}

namespace {

// Same rank and dims but the first, which is m times as large.
bool stacks(const ir::Shape& part, const ir::Shape& whole, int m) {
  if (part.empty() || part.size() != whole.size() || part[0] * m != whole[0]) return false;
  return std::equal(part.begin() + 1, part.end(), whole.begin() + 1);
}

}  // namespace

TensorMap join_microbatches(const std::vector<TensorMap>& parts, const ir::Graph& whole) {
  TensorMap out;
  const int m = static_cast<int>(parts.size());
  for (const auto& [name, first] : parts.at(0)) {
    if (!whole.has_tensor(name)) continue;
    const ir::Shape& want = whole.tensor(name).shape;
    if (name == autodiff::kLossWeight) {  // the minibatch's loss is its own mean
      out[name] = ir::Tensor::scalar_f32(1.0f);
      continue;
    }
    if (first.shape() == want) {
      out[name] = first;
      continue;
    }
    if (!stacks(first.shape(), want, m))
      throw RuntimeFault("'" + name + "' is " + ir::shape_str(first.shape()) +
                         " per microbatch but " + ir::shape_str(want) + " for the minibatch of " +
                         std::to_string(m) + " microbatches (not stacked along axis 0)");
    ir::Tensor joined(first.dtype(), want);
    char* dst = static_cast<char*>(joined.raw());
    for (const auto& part : parts) {
      const ir::Tensor& t = part.at(name);
      if (t.shape() != first.shape())
        throw RuntimeFault("'" + name + "' differs in shape between microbatches");
      std::memcpy(dst, t.raw(), t.nbytes());
      dst += t.nbytes();
    }
    out[name] = joined;
  }
  return out;
}

std::vector<ir::Tensor> cut_minibatch(const std::string& name, const ir::Tensor& t,
                                      const ir::Shape& micro, int m, double scale) {
  std::vector<ir::Tensor> parts;
  const bool same = t.shape() == micro;
  if (!same && !stacks(micro, t.shape(), m))
    throw RuntimeFault("'" + name + "' is " + ir::shape_str(t.shape()) + " for the minibatch but " +
                       ir::shape_str(micro) + " per microbatch");
  const size_t bytes = same ? t.nbytes() : t.nbytes() / static_cast<size_t>(m);
  for (int j = 0; j < m; ++j) {
    ir::Tensor part(t.dtype(), micro);
    std::memcpy(part.raw(), static_cast<const char*>(t.raw()) + (same ? 0 : j * bytes), bytes);
    if (scale != 1.0 && t.dtype() == ir::DType::kF32) {
      float* p = part.data<float>();
      const float f = static_cast<float>(scale);
      for (int64_t i = 0, n = part.numel(); i < n; ++i) p[i] *= f;
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

void check_same_transfers(const StageProgram& micro, const StageProgram& whole) {
  if (micro.recv_fwd == whole.recv_fwd && micro.send_fwd == whole.send_fwd &&
      micro.recv_bwd == whole.recv_bwd && micro.send_bwd == whole.send_bwd)
    return;
  throw PlanError("stage " + std::to_string(micro.stage) +
                  " of the graph at the minibatch size moves other tensors than at the "
                  "microbatch size (the model's graph depends on its batch size)");
}

void check_batched_weights(const StageProgram& micro, const StageProgram& whole) {
  const std::string where = "stage " + std::to_string(micro.stage);
  const ir::Graph& a = micro.backward_weight;
  const ir::Graph& b = whole.backward_weight;
  std::vector<std::string> in_a = a.inputs, in_b = b.inputs;
  std::sort(in_a.begin(), in_a.end());
  std::sort(in_b.begin(), in_b.end());
  if (in_a != in_b || micro.grads != whole.grads || micro.carry != whole.carry)
    throw PlanError(where +
                    " splits its backward differently at the minibatch size (the model's graph "
                    "depends on its batch size)");
  int64_t factor = 0;
  for (const auto& name : in_a) {
    const ir::Shape& part = a.tensor(name).shape;
    const ir::Shape& all = b.tensor(name).shape;
    const int64_t f =
        !part.empty() && part[0] > 0 && all.size() == part.size() && all[0] % part[0] == 0
            ? all[0] / part[0]
            : 0;
    if (f < 2 || !stacks(part, all, static_cast<int>(f)) || (factor && f != factor))
      throw PlanError(where + ": its weight gradients read '" + name + "', " + ir::shape_str(part) +
                      " per microbatch and " + ir::shape_str(all) +
                      " for the minibatch, which is not the microbatches stacked along axis 0");
    factor = f;
  }
}

}  // namespace pipetrain::exec
