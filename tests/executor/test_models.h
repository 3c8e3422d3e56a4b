// Small models the stage-program and pipeline tests cut into stages: a
// three-layer MLP with a skip connection (h1 is read by layer 2, past layer
// 1), built directly in the IR, so that a tensor goes from stage 0 straight
// to stage 2; and the zoo's MLP (one node per layer) with a cross-entropy
// loss. The runner tests' MLP with views and its backward pass.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "autodiff/autodiff.h"
#include "autodiff/training_graph.h"
#include "importer/importer.h"
#include "ir/graph.h"
#include "models/zoo.h"

namespace pipetrain::testing_models {

inline ir::Tensor wave(ir::Shape shape, double phase, double scale = 1.0) {
  ir::Tensor t(ir::DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] =
        static_cast<float>(std::sin(0.37 * static_cast<double>(i) + phase) * scale);
  return t;
}

inline ir::Node node(std::string name, std::string op, std::vector<std::string> in,
                     std::vector<std::string> out) {
  return {std::move(name), std::move(op), std::move(in), std::move(out), {}};
}

struct GraphWithGrads {
  ir::Graph graph;
  std::map<std::string, std::string> grads;  // param -> its gradient output
};

// x (8, 2, 8) -> Reshape -> Gemm(w1, b1) -> Relu -> MatMul(w2) -> cross-entropy
// with labels y (8), and its backward: a view (the Reshape), w1's and w2's
// gradients from GEMMs (w2's through a view too), b1's from a ReduceSum.
inline GraphWithGrads reshape_mlp() {
  GraphWithGrads m;
  ir::Graph& g = m.graph;
  g.set_tensor({"x", ir::DType::kF32, {8, 2, 8}, ir::Role::kInput});
  g.set_tensor({"y", ir::DType::kI64, {8}, ir::Role::kInput});
  g.inputs = {"x", "y"};
  g.set_value("shape", ir::Tensor::from_i64({8, 16}, {2}), ir::Role::kConstant);
  g.set_value("w1", wave({16, 32}, 0.1, 0.3), ir::Role::kParam);
  g.set_value("b1", wave({32}, 0.2, 0.3), ir::Role::kParam);
  g.set_value("w2", wave({32, 10}, 0.3, 0.3), ir::Role::kParam);
  g.nodes.push_back(node("flat", "Reshape", {"x", "shape"}, {"xf"}));
  g.nodes.push_back(node("fc1", "Gemm", {"xf", "w1", "b1"}, {"h"}));
  g.nodes.push_back(node("act", "Relu", {"h"}, {"a"}));
  g.nodes.push_back(node("fc2", "MatMul", {"a", "w2"}, {"logits"}));
  g.nodes.push_back(node("loss", "SoftmaxCrossEntropyLoss", {"logits", "y"}, {"loss"}));
  g.outputs = {"loss"};
  g.infer_shapes();
  m.grads = autodiff::build_backward(g, "loss").grads;
  return m;
}

// x (4, 6) -> [L0] h1 = Relu(Gemm(x, w0, b0)) (4, 8)
//          -> [L1] h2 = Relu(Gemm(h1, w1, b1)) (4, 8)
//          -> [L2] logits = Gemm((h2 + h1) * h1, w2, b2) (4, 3)
// h1 skips layer 1; the Mul makes layer 2's backward read h1 too.
inline ir::Graph skip_mlp(int64_t batch = 4) {
  ir::Graph g;
  g.name = "skip_mlp";
  g.set_tensor({"x", ir::DType::kF32, {batch, 6}, ir::Role::kInput});
  g.inputs = {"x"};
  g.set_value("w0", wave({6, 8}, 0.1, 0.5), ir::Role::kParam);
  g.set_value("b0", wave({8}, 0.2, 0.1), ir::Role::kParam);
  g.set_value("w1", wave({8, 8}, 0.3, 0.5), ir::Role::kParam);
  g.set_value("b1", wave({8}, 0.4, 0.1), ir::Role::kParam);
  g.set_value("w2", wave({8, 3}, 0.5, 0.5), ir::Role::kParam);
  g.set_value("b2", wave({3}, 0.6, 0.1), ir::Role::kParam);
  g.nodes = {node("gemm0", "Gemm", {"x", "w0", "b0"}, {"a0"}),
             node("relu0", "Relu", {"a0"}, {"h1"}),
             node("gemm1", "Gemm", {"h1", "w1", "b1"}, {"a1"}),
             node("relu1", "Relu", {"a1"}, {"h2"}),
             node("add", "Add", {"h2", "h1"}, {"s"}),
             node("mul", "Mul", {"s", "h1"}, {"m"}),
             node("gemm2", "Gemm", {"m", "w2", "b2"}, {"logits"})};
  g.outputs = {"logits"};
  g.set_layers({{"l0", {0, 1}}, {"l1", {2, 3}}, {"l2", {4, 5, 6}}});
  g.infer_shapes();
  g.verify();
  return g;
}

// The zoo's MLP (Gemm + Relu per hidden width, then a Gemm head) at a fixed
// batch, one node per layer, with cross-entropy attached.
inline autodiff::TrainingGraph zoo_mlp(int64_t batch, int64_t features, std::vector<int64_t> hidden,
                                       int64_t classes, uint64_t seed) {
  models::ZooOptions opts;
  opts.batch = batch;
  opts.seed = seed;
  opts.in_features = features;
  opts.hidden = std::move(hidden);
  opts.num_classes = classes;
  onnx::ModelProto proto = models::build_zoo_model("mlp", opts);
  ir::Graph model = importer::import_model_bytes(proto.SerializeAsString(), ".", {});
  return autodiff::build_training_graph(model, {"cross-entropy", ""});
}

// An MLP with two BatchNorms (training mode: batch statistics), one node per
// layer, with cross-entropy: x (B, 6) -> Gemm -> BN -> Relu -> Gemm -> Relu
// -> Gemm -> BN -> Gemm -> logits (B, 3). Cut 0-2 | 3-5 | 6-7, its first and
// last stages normalise and the middle one does not.
inline autodiff::TrainingGraph bn_mlp(int64_t batch) {
  ir::Graph g;
  g.name = "bn_mlp";
  g.set_tensor({"x", ir::DType::kF32, {batch, 6}, ir::Role::kInput});
  g.inputs = {"x"};
  const std::vector<std::pair<int64_t, int64_t>> gemms = {{6, 8}, {8, 8}, {8, 8}, {8, 3}};
  for (size_t k = 0; k < gemms.size(); ++k) {
    const auto [in, out] = gemms[k];
    g.set_value("w" + std::to_string(k), wave({in, out}, 0.1 + 0.2 * double(k), 0.6),
                ir::Role::kParam);
    g.set_value("b" + std::to_string(k), wave({out}, 0.2 + 0.2 * double(k), 0.1),
                ir::Role::kParam);
  }
  for (int k = 0; k < 2; ++k) {
    const std::string s = std::to_string(k);
    g.set_value("gamma" + s, wave({8}, 0.7 + k, 0.2), ir::Role::kParam);
    g.set_value("beta" + s, wave({8}, 0.9 + k, 0.1), ir::Role::kParam);
    g.set_value("mean" + s, wave({8}, 1.1 + k, 0.05), ir::Role::kBuffer);
    ir::Tensor var = wave({8}, 1.3 + k, 0.1);
    for (int64_t i = 0; i < 8; ++i) var.data<float>()[i] += 1.0f;
    g.set_value("var" + s, var, ir::Role::kBuffer);
  }
  g.nodes = {node("gemm0", "Gemm", {"x", "w0", "b0"}, {"a0"}),
             node("bn0", "BatchNormalization", {"a0", "gamma0", "beta0", "mean0", "var0"}, {"n0"}),
             node("relu0", "Relu", {"n0"}, {"h0"}),
             node("gemm1", "Gemm", {"h0", "w1", "b1"}, {"a1"}),
             node("relu1", "Relu", {"a1"}, {"h1"}),
             node("gemm2", "Gemm", {"h1", "w2", "b2"}, {"a2"}),
             node("bn1", "BatchNormalization", {"a2", "gamma1", "beta1", "mean1", "var1"}, {"n2"}),
             node("gemm3", "Gemm", {"n2", "w3", "b3"}, {"logits"})};
  g.outputs = {"logits"};
  std::vector<ir::Layer> layers;
  for (size_t i = 0; i < g.nodes.size(); ++i) layers.push_back({g.nodes[i].name, {i}});
  g.set_layers(layers);
  g.infer_shapes();
  g.verify();
  return autodiff::build_training_graph(g, {"cross-entropy", ""});
}

// A tiny language model whose LM head reuses the token embedding (tied, as
// in GPT-2), one node per layer: ids (B, T) -> Gather(w_emb (V, H)) ->
// (B T, H) -> Gemm(w_mid) -> Tanh -> Gemm(w_emb^T) -> logits (B, T, V), with
// per-token cross-entropy. `head` names the LM head's weight: "w_emb" ties
// it; another name gives the untied twin (a copy of the same values).
inline autodiff::TrainingGraph tied_lm(int64_t batch, const std::string& head = "w_emb") {
  constexpr int64_t kT = 3, kV = 7, kH = 5;
  ir::Graph g;
  g.name = "tied_lm";
  g.set_tensor({"ids", ir::DType::kI64, {batch, kT}, ir::Role::kInput});
  g.inputs = {"ids"};
  g.set_value("w_emb", wave({kV, kH}, 0.2, 0.5), ir::Role::kParam);
  if (head != "w_emb") g.set_value(head, wave({kV, kH}, 0.2, 0.5), ir::Role::kParam);
  g.set_value("w_mid", wave({kH, kH}, 0.4, 0.6), ir::Role::kParam);
  g.set_value("rows", ir::Tensor::from_i64({-1, kH}, {2}), ir::Role::kConstant);
  g.set_value("lm_shape", ir::Tensor::from_i64({batch, kT, kV}, {3}), ir::Role::kConstant);
  ir::Node head_gemm = node("head", "Gemm", {"t", head}, {"logits2"});
  head_gemm.attrs["transB"] = ir::Attribute(int64_t{1});
  g.nodes = {node("emb", "Gather", {"w_emb", "ids"}, {"e"}),
             node("flat", "Reshape", {"e", "rows"}, {"e2"}),
             node("mid", "Gemm", {"e2", "w_mid"}, {"m"}),
             node("act", "Tanh", {"m"}, {"t"}),
             head_gemm,
             node("unflat", "Reshape", {"logits2", "lm_shape"}, {"logits"})};
  g.outputs = {"logits"};
  g.set_layers(
      {{"emb", {0}}, {"flat", {1}}, {"mid", {2}}, {"act", {3}}, {"head", {4}}, {"unflat", {5}}});
  g.infer_shapes();
  autodiff::LossSpec loss{"cross-entropy", ""};
  loss.classes_last = true;
  return autodiff::build_training_graph(g, loss);
}

}  // namespace pipetrain::testing_models
