// PyTorch modules as ONNX subgraphs, each in its own scope (`name`, or the
// caller's scope when empty), written the way torch.onnx.export writes them.
// Internal to models/.
#pragma once

#include <cmath>
#include <string>

#include "models/onnx_builder.h"

namespace pipetrain::models {

/// nn.Linear's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), which is
/// kaiming_uniform(a = sqrt(5)) for the weight and the bias alike.
inline Init fan_in_uniform(int64_t fan_in) {
  return Init::uniform(1.0f / std::sqrt(static_cast<float>(fan_in)));
}

/// nn.Linear on a 2-D input, as Gemm(x, W, b, transB = 1); W (out, in), b (out).
/// `out_name` names the output (a graph output such as "logits").
std::string linear(OnnxBuilder& b, const std::string& name, const std::string& x, int64_t in,
                   int64_t out, bool bias = true, const std::string& out_name = "");

/// A linear layer on (..., in): MatMul(x, W) (+ b); W (in, out), b (out).
std::string linear_nd(OnnxBuilder& b, const std::string& name, const std::string& x, int64_t in,
                      int64_t out, bool bias, Init weight_init, Init bias_init,
                      const std::string& out_name = "");

/// nn.Conv2d: W (cout, cin, k, k), b (cout); default init (fan_in = cin*k*k).
std::string conv2d(OnnxBuilder& b, const std::string& name, const std::string& x, int64_t cin,
                   int64_t cout, int64_t kernel, int64_t stride, int64_t pad, bool bias);

/// nn.BatchNorm2d in training mode (batch statistics; the running statistics
/// are buffers: mean 0, var 1, momentum 0.9 in ONNX's convention).
std::string batch_norm(OnnxBuilder& b, const std::string& name, const std::string& x, int64_t c);

/// nn.LayerNorm over the last dimension (weight 1, bias 0).
std::string layer_norm(OnnxBuilder& b, const std::string& name, const std::string& x, int64_t dim,
                       float epsilon);

std::string relu(OnnxBuilder& b, const std::string& name, const std::string& x);

std::string max_pool(OnnxBuilder& b, const std::string& name, const std::string& x, int64_t kernel,
                     int64_t stride, int64_t pad);

/// Dropout(x, ratio) with no training_mode input: the run decides.
std::string dropout(OnnxBuilder& b, const std::string& name, const std::string& x, float ratio);

/// nn.Embedding lookup: Gather(table, ids) with table (vocab, dim).
std::string embedding(OnnxBuilder& b, const std::string& name, const std::string& ids,
                      int64_t vocab, int64_t dim, Init init);

/// nn.LSTM (one layer) on X (T, N, in): ONNX LSTM with W (dirs, 4h, in),
/// R (dirs, 4h, h), B (dirs, 8h) drawn from `init`; returns Y (T, N, dirs*h)
/// (directions concatenated on the last axis, as PyTorch returns them).
std::string lstm(OnnxBuilder& b, const std::string& name, const std::string& x, int64_t in,
                 int64_t hidden, bool bidirectional, Init init);

}  // namespace pipetrain::models
