#include "models/layers.h"

#include <optional>

namespace pipetrain::models {

namespace {

// The module's own scope, or none when `name` is empty.
struct MaybeScope {
  MaybeScope(OnnxBuilder& b, const std::string& name) {
    if (!name.empty()) scope.emplace(&b, name);
  }
  std::optional<OnnxBuilder::Scope> scope;
};

}  // namespace

std::string linear(OnnxBuilder& b, const std::string& name, const std::string& x, int64_t in,
                   int64_t out, bool bias, const std::string& out_name) {
  MaybeScope s(b, name);
  std::vector<std::string> inputs = {x, b.param("weight", {out, in}, fan_in_uniform(in))};
  if (bias) inputs.push_back(b.param("bias", {out}, fan_in_uniform(in)));
  return b.op("Gemm", inputs,
              {attr_float("alpha", 1.0f), attr_float("beta", 1.0f), attr_int("transB", 1)},
              out_name);
}

std::string linear_nd(OnnxBuilder& b, const std::string& name, const std::string& x, int64_t in,
                      int64_t out, bool bias, Init weight_init, Init bias_init,
                      const std::string& out_name) {
  MaybeScope s(b, name);
  std::string w = b.param("weight", {in, out}, weight_init);
  if (!bias) return b.op("MatMul", {x, w}, {}, out_name);
  std::string bias_name = b.param("bias", {out}, bias_init);
  return b.op("Add", {b.op("MatMul", {x, w}), bias_name}, {}, out_name);
}

std::string conv2d(OnnxBuilder& b, const std::string& name, const std::string& x, int64_t cin,
                   int64_t cout, int64_t kernel, int64_t stride, int64_t pad, bool bias) {
  MaybeScope s(b, name);
  Init init = fan_in_uniform(cin * kernel * kernel);
  std::vector<std::string> inputs = {x, b.param("weight", {cout, cin, kernel, kernel}, init)};
  if (bias) inputs.push_back(b.param("bias", {cout}, init));
  return b.op("Conv", inputs,
              {attr_ints("dilations", {1, 1}), attr_int("group", 1),
               attr_ints("kernel_shape", {kernel, kernel}), attr_ints("pads", {pad, pad, pad, pad}),
               attr_ints("strides", {stride, stride})});
}

std::string batch_norm(OnnxBuilder& b, const std::string& name, const std::string& x, int64_t c) {
  MaybeScope s(b, name);
  std::string scale = b.param("weight", {c}, Init::constant(1.0f));
  std::string shift = b.param("bias", {c}, Init::constant(0.0f));
  std::string mean = b.buffer("running_mean", {c}, Init::constant(0.0f));
  std::string var = b.buffer("running_var", {c}, Init::constant(1.0f));
  // PyTorch's momentum 0.1 is ONNX's 0.9 (weight of the running value).
  return b.ops("BatchNormalization", {x, scale, shift, mean, var}, 3,
               {attr_float("epsilon", 1e-5f), attr_float("momentum", 0.9f),
                attr_int("training_mode", 1)})[0];
}

std::string layer_norm(OnnxBuilder& b, const std::string& name, const std::string& x, int64_t dim,
                       float epsilon) {
  MaybeScope s(b, name);
  std::string scale = b.param("weight", {dim}, Init::constant(1.0f));
  std::string shift = b.param("bias", {dim}, Init::constant(0.0f));
  return b.op("LayerNormalization", {x, scale, shift},
              {attr_int("axis", -1), attr_float("epsilon", epsilon)});
}

std::string relu(OnnxBuilder& b, const std::string& name, const std::string& x) {
  MaybeScope s(b, name);
  return b.op("Relu", {x});
}

std::string max_pool(OnnxBuilder& b, const std::string& name, const std::string& x, int64_t kernel,
                     int64_t stride, int64_t pad) {
  MaybeScope s(b, name);
  return b.op("MaxPool", {x},
              {attr_int("ceil_mode", 0), attr_ints("kernel_shape", {kernel, kernel}),
               attr_ints("pads", {pad, pad, pad, pad}), attr_ints("strides", {stride, stride})});
}

std::string dropout(OnnxBuilder& b, const std::string& name, const std::string& x, float ratio) {
  MaybeScope s(b, name);
  return b.op("Dropout", {x, b.scalar_f32(ratio)});
}

std::string embedding(OnnxBuilder& b, const std::string& name, const std::string& ids,
                      int64_t vocab, int64_t dim, Init init) {
  MaybeScope s(b, name);
  return b.op("Gather", {b.param("weight", {vocab, dim}, init), ids});
}

std::string lstm(OnnxBuilder& b, const std::string& name, const std::string& x, int64_t in,
                 int64_t hidden, bool bidirectional, Init init) {
  MaybeScope s(b, name);
  const int64_t dirs = bidirectional ? 2 : 1;
  std::string w = b.param("weight_ih", {dirs, 4 * hidden, in}, init);
  std::string r = b.param("weight_hh", {dirs, 4 * hidden, hidden}, init);
  std::string bias = b.param("bias", {dirs, 8 * hidden}, init);
  std::string y = b.op("LSTM", {x, w, r, bias},
                       {attr_string("direction", bidirectional ? "bidirectional" : "forward"),
                        attr_int("hidden_size", hidden)});                    // (T, dirs, N, h)
  if (!bidirectional) return b.op("Squeeze", {y, b.constant_i64({1})});       // (T, N, h)
  std::string t = b.op("Transpose", {y}, {attr_ints("perm", {0, 2, 1, 3})});  // (T, N, 2, h)
  return b.op("Reshape", {t, b.constant_i64({0, 0, -1})});                    // (T, N, 2h)
}

}  // namespace pipetrain::models
