#include "autodiff/training_graph.h"

#include "autodiff/autodiff.h"
#include "ir/error.h"
#include "ir/op_registry.h"

namespace pipetrain::autodiff {

namespace {

/// Appends a node (shapes inferred) to the graph and its last layer.
void append(ir::Graph& g, ir::Node n) {
  auto outs = ir::infer_node(g, n);
  for (size_t k = 0; k < n.outputs.size(); ++k)
    if (!n.outputs[k].empty())
      g.set_tensor({n.outputs[k], outs[k].first, outs[k].second, ir::Role::kActivation});
  if (!g.layers.empty()) {
    n.layer = static_cast<int>(g.layers.size() - 1);
    g.layers.back().nodes.push_back(g.nodes.size());
  }
  g.nodes.push_back(std::move(n));
}

// Training-mode BatchNormalization: batch statistics, and the running
// statistics it outputs replace the buffers after each step.
void batch_norm_to_training(ir::Graph& g, TrainingGraph& tg) {
  for (auto& n : g.nodes) {
    if (n.op_type != "BatchNormalization") continue;
    n.attrs["training_mode"] = ir::Attribute(int64_t{1});
    n.outputs.resize(3);
    for (size_t k = 1; k < 3; ++k) {
      if (n.outputs[k].empty()) n.outputs[k] = n.name + (k == 1 ? "/running_mean" : "/running_var");
      const std::string& buffer = n.inputs[k + 2];
      const ir::TensorDesc& d = g.tensor(buffer);
      g.set_tensor({n.outputs[k], d.dtype, d.shape, ir::Role::kActivation});
      if (g.has_value(buffer)) {
        tg.buffer_updates.emplace_back(n.outputs[k], buffer);
        g.outputs.push_back(n.outputs[k]);
      }
    }
  }
}

std::string find_own_loss(const ir::Graph& g) {
  for (const auto& o : g.outputs) {
    const ir::TensorDesc& d = g.tensor(o);
    if (ir::is_float(d.dtype) && ir::numel(d.shape) == 1) return o;
  }
  throw ModelError(
      "the model has no loss output (a float output with one element); "
      "attach one with --loss cross-entropy|mse");
}

void attach_loss(ir::Graph& g, const LossSpec& spec, TrainingGraph& tg) {
  std::string out = spec.output.empty() ? g.outputs.at(0) : spec.output;
  if (std::find(g.outputs.begin(), g.outputs.end(), out) == g.outputs.end())
    throw ModelError("'" + out + "' is not an output of the model");
  const ir::TensorDesc pred = g.tensor(out);
  tg.prediction = out;
  tg.labels = "labels";
  tg.loss = "loss";
  if (spec.kind == "cross-entropy") {
    if (pred.shape.size() < 2)
      throw ModelError("cross-entropy needs logits (N, C, ...); output '" + out + "' is " +
                       ir::shape_str(pred.shape));
    const bool last = spec.classes_last && pred.shape.size() > 2;
    tg.class_axis = last ? static_cast<int64_t>(pred.shape.size()) - 1 : 1;
    tg.classes = pred.shape[static_cast<size_t>(tg.class_axis)];
    tg.ignore_index = spec.ignore_index;
    ir::Shape label_shape = {pred.shape[0]};
    if (last)
      label_shape.assign(pred.shape.begin(), pred.shape.end() - 1);
    else
      label_shape.insert(label_shape.end(), pred.shape.begin() + 2, pred.shape.end());
    g.set_tensor({tg.labels, ir::DType::kI64, label_shape, ir::Role::kInput});
    g.inputs.push_back(tg.labels);
    std::string logits = out, ids = tg.labels;
    if (last) {
      // (N, T.., V) -> (N T.., V) and labels (N, T..) -> (N T..): SoftmaxCrossEntropyLoss
      // wants the classes on axis 1; reshapes are views, a transpose would copy the logits.
      ir::Tensor rows(ir::DType::kI64, {2});
      rows.data<int64_t>()[0] = -1;
      rows.data<int64_t>()[1] = tg.classes;
      ir::Tensor flat(ir::DType::kI64, {1});
      flat.data<int64_t>()[0] = -1;
      g.set_value("loss/logits_shape", rows, ir::Role::kConstant);
      g.set_value("loss/labels_shape", flat, ir::Role::kConstant);
      append(g,
             {"loss/logits/Reshape", "Reshape", {out, "loss/logits_shape"}, {"loss/logits"}, {}});
      append(g, {"loss/labels/Reshape",
                 "Reshape",
                 {tg.labels, "loss/labels_shape"},
                 {"loss/labels"},
                 {}});
      logits = "loss/logits";
      ids = "loss/labels";
    }
    append(g, {"loss/SoftmaxCrossEntropyLoss",
               "SoftmaxCrossEntropyLoss",
               {logits, ids},
               {"loss/mean"},
               {{"ignore_index", ir::Attribute(spec.ignore_index)}}});
    tg.loss_weight = kLossWeight;
    g.set_tensor({tg.loss_weight, ir::DType::kF32, {}, ir::Role::kInput});
    g.inputs.push_back(tg.loss_weight);
    append(g, {"loss/Mul", "Mul", {"loss/mean", tg.loss_weight}, {tg.loss}, {}});
  } else if (spec.kind == "mse") {
    g.set_tensor({tg.labels, pred.dtype, pred.shape, ir::Role::kInput});
    g.inputs.push_back(tg.labels);
    append(g, {"loss/Sub", "Sub", {out, tg.labels}, {"loss/diff"}, {}});
    append(g, {"loss/Mul", "Mul", {"loss/diff", "loss/diff"}, {"loss/sq"}, {}});
    append(g, {"loss/ReduceMean",
               "ReduceMean",
               {"loss/sq"},
               {tg.loss},
               {{"keepdims", ir::Attribute(int64_t{0})}}});
  } else {
    throw ModelError("unknown loss '" + spec.kind + "' (expected cross-entropy or mse)");
  }
  g.outputs = {tg.loss};
}

}  // namespace

TrainingGraph build_training_graph(const ir::Graph& model, const LossSpec& loss) {
  TrainingGraph tg;
  tg.graph = model;  // Tensor copies share buffers: params stay the model's own
  ir::Graph& g = tg.graph;
  if (loss.kind.empty()) {
    if (!loss.output.empty()) throw ModelError("an output for the loss needs --loss");
    tg.loss = find_own_loss(g);
    g.outputs = {tg.loss};
  } else {
    attach_loss(g, loss, tg);
  }
  batch_norm_to_training(g, tg);
  BackwardResult bw = build_backward(g, tg.loss);
  tg.grads = bw.grads;
  g.verify();
  return tg;
}

}  // namespace pipetrain::autodiff
