// GNMT-8 as PipeDream trains it (runtime/translation/models/gnmt_large,
// built from the MLPerf GNMT modules): hidden 1024, vocab 32320, separate
// source and target embeddings, teacher forcing on full-length sequences (no
// padding masks). Tensors between recurrent layers are time-major (T, N, H),
// as nn.LSTM's; inputs and logits are batch-major.
//
// Parameters at hidden h = 1024, vocab V = 32320 (an LSTM layer from in to h
// holds 4h(in + h) + 8h per direction, as PyTorch's weight_ih, weight_hh,
// bias_ih, bias_hh):
//   embeddings        2 V h                  = 66,191,360
//   encoder layer 0   2 (4h(h + h) + 8h)     = 16,793,600  (bidirectional)
//   encoder layer 1   4h(2h + h) + 8h        = 12,591,104
//   encoder 2..7      6 (4h(h + h) + 8h)     = 50,380,800
//   attention LSTM    4h(h + h) + 8h         =  8,396,800
//   attention         2 h^2 + 2h + 1         =  2,099,201  (linear_q, linear_k,
//                                                           linear_att, normalize_bias, _scalar)
//   decoder 0..6      7 (4h(2h + h) + 8h)    = 88,137,728
//   classifier        h V + V                = 33,128,000
//   total                                    = 277,718,593
#include <string>

#include "models/builders.h"
#include "models/layers.h"

namespace pipetrain::models {

namespace {

constexpr int kLayers = 8;
constexpr float kDropout = 0.2f;
// MLPerf GNMT initialises embeddings, LSTMs and the classifier U(-0.1, 0.1).
const Init kInit = Init::uniform(0.1f);

// Widths: 1024 and 32320 divided by ZooOptions::width_divisor.
struct Dims {
  int64_t hidden, vocab;
};

// (T, N, C) <-> (N, T, C).
std::string swap01(OnnxBuilder& b, const std::string& x) {
  return b.op("Transpose", {x}, {attr_ints("perm", {1, 0, 2})});
}

// Embedding lookup of ids (N, T), returned time-major (T, N, H).
std::string embed(OnnxBuilder& b, const Dims& d, const std::string& ids) {
  auto s = b.scope("embedder");
  return swap01(b, b.op("Gather", {b.param("weight", {d.vocab, d.hidden}, kInit), ids}));
}

// ResidualRecurrentEncoder: (T, N, H) context. Each layer's scope holds the
// dropout before it and its residual sum, so a layer is one partition unit.
std::string encoder(OnnxBuilder& b, const Dims& d, const std::string& source) {
  const int64_t h = d.hidden;
  auto s = b.scope("encoder");
  std::string x = embed(b, d, source);
  // A ModuleList has no scope of its own in PyTorch's names: "/encoder/rnn_layers.1/LSTM".
  x = lstm(b, "rnn_layers.0", x, h, h, true, kInit);  // (T, N, 2H)
  for (int i = 1; i < kLayers; ++i) {
    auto layer = b.scope("rnn_layers." + std::to_string(i));
    std::string residual = x;
    x = dropout(b, "", x, kDropout);
    x = lstm(b, "", x, i == 1 ? 2 * h : h, h, false, kInit);
    if (i >= 2) x = b.op("Add", {x, residual});
  }
  return x;
}

// BahdanauAttention(normalize = True) of queries (Tq, N, H) over keys
// (Tk, N, H); returns the context (Tq, N, H):
//   score[n, q, k] = sum_j v'_j tanh(Wq query[q] + Wk key[k] + b)_j,
//   v' = g v / |v|,  p = softmax_k(score),  context[q] = sum_k p[q, k] key[k].
std::string attention(OnnxBuilder& b, int64_t h, const std::string& query_tm,
                      const std::string& keys_tm) {
  auto s = b.scope("attn");
  const Init fan_in = fan_in_uniform(h);
  std::string query = swap01(b, query_tm);  // (N, Tq, H)
  std::string keys = swap01(b, keys_tm);    // (N, Tk, H)
  std::string pq = linear_nd(b, "linear_q", query, h, h, false, fan_in, fan_in);
  std::string pk = linear_nd(b, "linear_k", keys, h, h, false, fan_in, fan_in);
  std::string v = b.param("linear_att", {h}, fan_in);
  std::string g = b.param("normalize_scalar", {1}, Init::constant(fan_in.a));  // 1/sqrt(H)
  std::string bias = b.param("normalize_bias", {h}, Init::constant(0.0f));
  std::string sum_qk =
      b.op("Add", {b.op("Unsqueeze", {pq, b.constant_i64({2})}),                // (N, Tq, 1, H)
                   b.op("Unsqueeze", {pk, b.constant_i64({1})})});              // (N, 1, Tk, H)
  std::string energy = b.op("Tanh", {b.op("Add", {sum_qk, bias})});             // (N, Tq, Tk, H)
  std::string norm = b.op("Sqrt", {b.op("ReduceSum", {b.op("Mul", {v, v})})});  // (1)
  std::string v_scaled = b.op("Mul", {b.op("Div", {v, norm}), g});              // (H)
  std::string column = b.op("Unsqueeze", {v_scaled, b.constant_i64({1})});      // (H, 1)
  std::string scores = b.op("Squeeze", {b.op("MatMul", {energy, column}), b.constant_i64({3})});
  std::string p = b.op("Softmax", {scores}, {attr_int("axis", -1)});  // (N, Tq, Tk)
  return swap01(b, b.op("MatMul", {p, keys}));                        // (Tq, N, H)
}

// ResidualRecurrentDecoder with teacher forcing; returns logits (N, T, V).
std::string decoder(OnnxBuilder& b, const Dims& d, const std::string& target,
                    const std::string& context) {
  const int64_t h = d.hidden;
  auto s = b.scope("decoder");
  std::string x = embed(b, d, target);
  std::string attn;
  {
    auto att_rnn = b.scope("att_rnn");
    x = lstm(b, "rnn", x, h, h, false, kInit);
    attn = attention(b, h, x, context);
  }
  for (int i = 0; i < kLayers - 1; ++i) {
    auto layer = b.scope("rnn_layers." + std::to_string(i));
    std::string residual = x;
    x = dropout(b, "", x, kDropout);
    x = b.op("Concat", {x, attn}, {attr_int("axis", 2)});  // (T, N, 2H)
    x = lstm(b, "", x, 2 * h, h, false, kInit);
    if (i > 0) x = b.op("Add", {x, residual});
  }
  auto classifier = b.scope("classifier");
  return linear_nd(b, "classifier", swap01(b, x), h, d.vocab, true, kInit, kInit, "logits");
}

}  // namespace

void build_gnmt(OnnxBuilder& b, const ZooOptions& o) {
  int64_t seq = option_or("gnmt", "seq_len", o.seq_len, 50);
  std::string source = b.input("source", onnx::TensorProto::INT64, {o.batch, seq});
  std::string target = b.input("target", onnx::TensorProto::INT64, {o.batch, seq});
  const Dims d{1024 / o.width_divisor, 32320 / o.width_divisor};
  std::string context = encoder(b, d, source);
  b.output(decoder(b, d, target, context), onnx::TensorProto::FLOAT, {o.batch, seq, d.vocab});
}

}  // namespace pipetrain::models
