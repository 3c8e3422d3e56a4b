// BERT-base and GPT-2 small, module for module as HF transformers defines
// them (names, shapes, initialisation: N(0, 0.02) weights and embeddings,
// zero biases, LayerNorm 1 and 0; GPT-2 scales its residual projections'
// weights by 1/sqrt(2 * layers)). Sequences are full length (no padding
// mask); token types are all 0.
//
// BERT-base, hidden h = 768, FFN f = 3072, vocab V = 30522:
//   embeddings  (V + 512 + 2) h + 2h          = 23,837,184
//   12 layers   12 (4 h^2 + 4h + 2hf + f + h + 4h)
//                                             = 85,054,464
//   pooler      h^2 + h                       =    590,592
//   total (HF BertModel, bert-base-uncased)   = 109,482,240
//   + sequence classifier 768 K + K (K = num_classes, default 2).
// GPT-2 small, vocab 50257, 1024 positions:
//   wte + wpe   (50257 + 1024) 768            = 39,383,808
//   12 blocks   12 (4h + 3h^2 + 3h + h^2 + h + 2hf + f + h)
//                                             = 85,054,464
//   ln_f        2h                            =      1,536
//   total, lm_head tied to wte (HF gpt2)      = 124,439,808
#include <cmath>
#include <string>

#include "ir/error.h"
#include "models/builders.h"
#include "models/layers.h"

namespace pipetrain::models {

namespace {

constexpr int64_t kHeads = 12;
constexpr int64_t kLayers = 12;  // the default; ZooOptions::num_layers overrides
constexpr float kDropout = 0.1f;
const Init kNormal = Init::normal(0.02f);
const Init kZero = Init::constant(0.0f);

// Widths: 768 and 3072 divided by ZooOptions::width_divisor.
struct Dims {
  int64_t hidden, ffn;
  int64_t head_dim() const { return hidden / kHeads; }
};

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

// (N, S, h) -> (N, heads, S, d) with perm {0, 2, 1, 3}, or (N, heads, d, S)
// with {0, 2, 3, 1} (keys, ready for q k^T).
std::string split_heads(OnnxBuilder& b, const Dims& d, const std::string& x,
                        const std::vector<int64_t>& perm) {
  std::string r = b.op("Reshape", {x, b.constant_i64({0, 0, kHeads, d.head_dim()})});
  return b.op("Transpose", {r}, {attr_ints("perm", perm)});
}

// softmax(q k^T / sqrt(d) + mask) v over heads, merged back to (N, S, h).
// `mask` is "" (BERT: no mask) or a (S, S) additive causal mask.
std::string attend(OnnxBuilder& b, const Dims& d, const std::string& q, const std::string& k,
                   const std::string& v, const std::string& mask, const std::string& dropout_name) {
  std::string qh = split_heads(b, d, q, {0, 2, 1, 3});  // (N, heads, S, d)
  std::string kh = split_heads(b, d, k, {0, 2, 3, 1});  // (N, heads, d, S)
  std::string vh = split_heads(b, d, v, {0, 2, 1, 3});  // (N, heads, S, d)
  std::string scores = b.op(
      "Div", {b.op("MatMul", {qh, kh}), b.scalar_f32(std::sqrt(static_cast<float>(d.head_dim())))});
  if (!mask.empty()) scores = b.op("Add", {scores, mask});
  std::string p = b.op("Softmax", {scores}, {attr_int("axis", -1)});  // (N, heads, S, S)
  p = dropout(b, dropout_name, p, kDropout);
  std::string ctx = b.op("Transpose", {b.op("MatMul", {p, vh})}, {attr_ints("perm", {0, 2, 1, 3})});
  return b.op("Reshape", {ctx, b.constant_i64({0, 0, d.hidden})});  // (N, S, h)
}

// gelu(x) = x/2 (1 + erf(x / sqrt 2)), as BERT's "gelu" (torch's exact GELU).
std::string gelu_erf(OnnxBuilder& b, const std::string& x) {
  std::string e = b.op("Erf", {b.op("Div", {x, b.scalar_f32(1.41421356f)})});
  std::string y = b.op("Mul", {x, b.op("Add", {e, b.scalar_f32(1.0f)})});
  return b.op("Mul", {y, b.scalar_f32(0.5f)});
}

// GPT-2's gelu_new: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
std::string gelu_tanh(OnnxBuilder& b, const std::string& x) {
  std::string cube = b.op("Mul", {x, b.op("Mul", {x, x})});
  std::string inner = b.op("Add", {x, b.op("Mul", {cube, b.scalar_f32(0.044715f)})});
  std::string t = b.op("Tanh", {b.op("Mul", {inner, b.scalar_f32(0.7978845608f)})});
  std::string y = b.op("Mul", {x, b.op("Add", {t, b.scalar_f32(1.0f)})});
  return b.op("Mul", {y, b.scalar_f32(0.5f)});
}

// BertLayer (post-norm): x + attention -> LayerNorm -> x + FFN -> LayerNorm.
std::string bert_layer(OnnxBuilder& b, const Dims& d, const std::string& x) {
  const int64_t h = d.hidden;
  std::string attn_out;
  {
    auto s = b.scope("attention");
    std::string ctx;
    {
      auto self = b.scope("self");
      std::string q = linear_nd(b, "query", x, h, h, true, kNormal, kZero);
      std::string k = linear_nd(b, "key", x, h, h, true, kNormal, kZero);
      std::string v = linear_nd(b, "value", x, h, h, true, kNormal, kZero);
      ctx = attend(b, d, q, k, v, "", "dropout");
    }
    auto out = b.scope("output");
    std::string y = linear_nd(b, "dense", ctx, h, h, true, kNormal, kZero);
    y = b.op("Add", {dropout(b, "dropout", y, kDropout), x});
    attn_out = layer_norm(b, "LayerNorm", y, h, 1e-12f);
  }
  std::string inner;
  {
    auto s = b.scope("intermediate");
    inner = gelu_erf(b, linear_nd(b, "dense", attn_out, h, d.ffn, true, kNormal, kZero));
  }
  auto out = b.scope("output");
  std::string y = linear_nd(b, "dense", inner, d.ffn, h, true, kNormal, kZero);
  y = b.op("Add", {dropout(b, "dropout", y, kDropout), attn_out});
  return layer_norm(b, "LayerNorm", y, h, 1e-12f);
}

}  // namespace

void build_bert(OnnxBuilder& b, const ZooOptions& o) {
  constexpr int64_t kPositions = 512, kTypes = 2;
  const Dims d{768 / o.width_divisor, 3072 / o.width_divisor};
  const int64_t h = d.hidden;
  const int64_t vocab = option_or("bert", "vocab_size", o.vocab_size, 30522 / o.width_divisor);
  const int64_t layers = option_or("bert", "num_layers", o.num_layers, kLayers);
  int64_t seq = option_or("bert", "seq_len", o.seq_len, 128);
  if (seq > kPositions)
    throw ModelError("bert: seq_len " + std::to_string(seq) + " exceeds the 512 positions");
  int64_t classes = option_or("bert", "num_classes", o.num_classes, 2);
  std::string ids = b.input("input_ids", onnx::TensorProto::INT64, {o.batch, seq});
  std::string x;
  {
    auto s = b.scope("embeddings");
    std::string words = embedding(b, "word_embeddings", ids, vocab, h, kNormal);
    std::string types = embedding(b, "token_type_embeddings",
                                  b.constant_i64(std::vector<int64_t>(seq, 0)), kTypes, h,
                                  kNormal);  // (S, h)
    std::string positions = embedding(b, "position_embeddings", b.constant_i64(iota(seq)),
                                      kPositions, h, kNormal);  // (S, h)
    x = b.op("Add", {b.op("Add", {words, types}), positions});
    x = dropout(b, "dropout", layer_norm(b, "LayerNorm", x, h, 1e-12f), kDropout);
  }
  {
    auto s = b.scope("encoder");
    for (int64_t i = 0; i < layers; ++i) {
      auto layer = b.scope("layer." + std::to_string(i));  // a ModuleList item
      x = bert_layer(b, d, x);
    }
  }
  {
    auto s = b.scope("pooler");
    std::string first = b.op("Gather", {x, b.scalar_i64(0)}, {attr_int("axis", 1)});  // (N, h)
    x = b.op("Tanh", {linear_nd(b, "dense", first, h, h, true, kNormal, kZero)});
  }
  auto s = b.scope("classifier");
  x = dropout(b, "dropout", x, kDropout);
  b.output(linear_nd(b, "", x, h, classes, true, kNormal, kZero, "logits"),
           onnx::TensorProto::FLOAT, {o.batch, classes});
}

void build_gpt2(OnnxBuilder& b, const ZooOptions& o) {
  constexpr int64_t kPositions = 1024;
  const Dims d{768 / o.width_divisor, 3072 / o.width_divisor};
  const int64_t h = d.hidden;
  const int64_t vocab = option_or("gpt2", "vocab_size", o.vocab_size, 50257 / o.width_divisor);
  int64_t seq = option_or("gpt2", "seq_len", o.seq_len, kPositions);
  if (seq > kPositions)
    throw ModelError("gpt2: seq_len " + std::to_string(seq) + " exceeds the 1024 positions");
  const int64_t layers = option_or("gpt2", "num_layers", o.num_layers, kLayers);
  const Init proj_init = Init::normal(0.02f / std::sqrt(2.0f * static_cast<float>(layers)));
  std::string ids = b.input("input_ids", onnx::TensorProto::INT64, {o.batch, seq});
  std::string wte, x;
  {
    auto s = b.scope("transformer");
    {
      auto e = b.scope("wte");
      wte = b.param("weight", {vocab, h}, kNormal);
      x = b.op("Gather", {wte, ids});  // (N, S, h)
    }
    std::string positions = embedding(b, "wpe", b.constant_i64(iota(seq)), kPositions, h, kNormal);
    x = dropout(b, "drop", b.op("Add", {x, positions}), kDropout);
    // Additive causal mask (S, S): 0 where key <= query, -1e9 above the
    // diagonal (exp underflows to exactly 0 there; no inf in any gradient).
    std::vector<float> causal(static_cast<size_t>(seq * seq), 0.0f);
    for (int64_t q = 0; q < seq; ++q)
      for (int64_t k = q + 1; k < seq; ++k) causal[static_cast<size_t>(q * seq + k)] = -1e9f;
    std::string mask = b.constant_f32(causal, {seq, seq});
    for (int64_t i = 0; i < layers; ++i) {
      auto layer = b.scope("h." + std::to_string(i));  // a ModuleList item
      std::string a = layer_norm(b, "ln_1", x, h, 1e-5f);
      {
        auto attn = b.scope("attn");
        std::string qkv = linear_nd(b, "c_attn", a, h, 3 * h, true, kNormal, kZero);
        auto parts = b.ops("Split", {qkv, b.constant_i64({h, h, h})}, 3, {attr_int("axis", 2)});
        a = attend(b, d, parts[0], parts[1], parts[2], mask, "attn_dropout");
        a = linear_nd(b, "c_proj", a, h, h, true, proj_init, kZero);
        a = dropout(b, "resid_dropout", a, kDropout);
      }
      x = b.op("Add", {x, a});
      std::string m = layer_norm(b, "ln_2", x, h, 1e-5f);
      {
        auto mlp = b.scope("mlp");
        m = gelu_tanh(b, linear_nd(b, "c_fc", m, h, d.ffn, true, kNormal, kZero));
        m = linear_nd(b, "c_proj", m, d.ffn, h, true, proj_init, kZero);
        m = dropout(b, "dropout", m, kDropout);
      }
      x = b.op("Add", {x, m});
    }
    x = layer_norm(b, "ln_f", x, h, 1e-5f);
  }
  // lm_head shares wte: logits = x wte^T, as one Gemm on (N S, h).
  auto s = b.scope("lm_head");
  std::string rows = b.op("Reshape", {x, b.constant_i64({-1, h})});
  std::string logits = b.op("Gemm", {rows, wte}, {attr_int("transB", 1)});  // (N S, V)
  b.output(b.op("Reshape", {logits, b.constant_i64({-1, seq, vocab})}, {}, "logits"),
           onnx::TensorProto::FLOAT, {o.batch, seq, vocab});
}

}  // namespace pipetrain::models
