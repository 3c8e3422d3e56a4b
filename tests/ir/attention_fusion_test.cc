// fuse_attention (ir/passes/fusion.h): the attention block as exporters
// write it becomes one Attention node, whatever the scale's place, the mask's
// shape or the dropout; the loss and every parameter gradient then match the
// unfused graph's within float32 rounding; blocks others still read stay.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "autodiff/autodiff.h"
#include "executor/backend.h"
#include "executor/cpu/kernels/cpu_threads.h"
#include "executor/forward_runner.h"
#include "ir/passes/fusion.h"
#include "tests/autodiff/grad_check.h"

namespace pipetrain {
namespace {

using ir::Attribute;

enum class Mask { kNone, kSquare, kFourD, kInput };

struct Variant {
  bool scale_on_q = false;    // Div(Q, 2) before the product (PyTorch's MultiheadAttention)
  bool scale_by_mul = false;  // Mul by 0.5 instead of Div by 2
  Mask mask = Mask::kNone;
  float dropout = 0.0f;     // with training_mode true and a seed attribute
  bool read_probs = false;  // the probabilities are also a graph output
  bool read_kt = false;     // the keys' split of heads is also a graph output
  int64_t softmax_axis = -1;
};

constexpr int64_t kBatch = 2, kSeq = 6, kHidden = 8, kHeads = 2, kHeadDim = 4;

// x (2, 6, 8) -> q, k, v projections split into 2 heads -> softmax(q k^T / 2
// + mask) -> Dropout -> . v -> merged heads (12, 8) -> cross-entropy.
ir::Graph block(const Variant& v) {
  std::mt19937_64 rng(3);
  ir::Graph g;
  g.set_tensor({"x", ir::DType::kF32, {kBatch, kSeq, kHidden}, ir::Role::kInput});
  g.set_tensor({"y", ir::DType::kI64, {kBatch * kSeq}, ir::Role::kInput});
  g.inputs = {"x", "y"};
  for (const char* w : {"wq", "wk", "wv"})
    g.set_value(w, test::random_tensor({kHidden, kHidden}, test::Gen::kUniform, rng),
                ir::Role::kParam);
  g.set_value("c", ir::Tensor::scalar_f32(v.scale_by_mul ? 0.5f : 2.0f), ir::Role::kConstant);
  g.set_value("heads", ir::Tensor::from_i64({kBatch, kSeq, kHeads, kHeadDim}, {4}),
              ir::Role::kConstant);
  g.set_value("rows", ir::Tensor::from_i64({kBatch * kSeq, kHidden}, {2}), ir::Role::kConstant);
  g.set_value("ratio", ir::Tensor::scalar_f32(v.dropout), ir::Role::kConstant);
  ir::Tensor on(ir::DType::kBool, {});
  *static_cast<bool*>(on.raw()) = true;
  g.set_value("training", on, ir::Role::kConstant);
  // A causal mask: -1e4 above the diagonal, small values on and below it.
  const ir::Shape mask_shape =
      v.mask == Mask::kFourD ? ir::Shape{1, 1, kSeq, kSeq} : ir::Shape{kSeq, kSeq};
  ir::Tensor mask(ir::DType::kF32, mask_shape);
  for (int64_t i = 0; i < kSeq; ++i)
    for (int64_t j = 0; j < kSeq; ++j)
      mask.data<float>()[i * kSeq + j] = j > i ? -1e4f : 0.1f * static_cast<float>(i - j);
  if (v.mask == Mask::kInput) {
    g.set_tensor({"mask", ir::DType::kF32, mask_shape, ir::Role::kInput});
    g.inputs.push_back("mask");
  } else if (v.mask != Mask::kNone) {
    g.set_value("mask", mask, ir::Role::kConstant);
  }
  auto node = [&](const std::string& name, const std::string& op, std::vector<std::string> in,
                  std::vector<std::string> out, std::map<std::string, Attribute> attrs = {}) {
    g.nodes.push_back({name, op, std::move(in), std::move(out), std::move(attrs)});
  };
  auto perm = [](std::vector<int64_t> p) {
    return std::map<std::string, Attribute>{{"perm", Attribute(std::move(p))}};
  };
  const std::string scale_op = v.scale_by_mul ? "Mul" : "Div";
  for (const char* t : {"q", "k", "v"}) {
    const std::string s = t;
    node("/" + s + "/MatMul", "MatMul", {"x", "w" + s}, {s + "0"});
    node("/" + s + "/Reshape", "Reshape", {s + "0", "heads"}, {s + "1"});
    node("/" + s + "/Transpose", "Transpose", {s + "1"}, {s == "k" ? "kt" : s + "h"},
         perm(s == "k" ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3}));
  }
  std::string q = "qh", s = "s";
  if (v.scale_on_q) {
    node("/attn/ScaleQ", scale_op, {"qh", "c"}, {"qs"});
    q = "qs";
  }
  node("/attn/MatMul", "MatMul", {q, "kt"}, {v.scale_on_q ? s : "s0"});
  if (!v.scale_on_q) node("/attn/Scale", scale_op, {"s0", "c"}, {s});
  if (v.mask != Mask::kNone) {
    node("/attn/Mask", "Add", {s, "mask"}, {"sm"});
    s = "sm";
  }
  node("/attn/Softmax", "Softmax", {s}, {"p"}, {{"axis", Attribute(v.softmax_axis)}});
  std::string p = "p";
  if (v.dropout > 0) {
    node("/attn/Dropout", "Dropout", {"p", "ratio", "training"}, {"pd"},
         {{"seed", Attribute(int64_t{3})}});
    p = "pd";
  }
  node("/attn/MatMul_1", "MatMul", {p, "vh"}, {"o"});
  node("/attn/Transpose", "Transpose", {"o"}, {"om"}, perm({0, 2, 1, 3}));
  node("/attn/Rows", "Reshape", {"om", "rows"}, {"logits"});
  node("/loss", "SoftmaxCrossEntropyLoss", {"logits", "y"}, {"loss"});
  g.outputs = {"loss"};
  if (v.read_probs) g.outputs.push_back("p");
  if (v.read_kt) g.outputs.push_back("kt");
  g.infer_shapes();
  g.verify();
  return g;
}

int count(const ir::Graph& g, const std::string& op) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(),
                                        [&](const ir::Node& n) { return n.op_type == op; }));
}

std::vector<Variant> fusable() {
  std::vector<Variant> all;
  for (bool on_q : {false, true})
    for (bool mul : {false, true})
      for (Mask m : {Mask::kNone, Mask::kSquare, Mask::kFourD})
        for (float drop : {0.0f, 0.25f}) {
          Variant v;
          v.scale_on_q = on_q;
          v.scale_by_mul = mul;
          v.mask = m;
          v.dropout = drop;
          all.push_back(v);
        }
  Variant kept;  // K's split of heads stays a Transpose; the rest are read through
  kept.read_kt = true;
  kept.mask = Mask::kSquare;
  all.push_back(kept);
  return all;
}

std::string describe(const Variant& v) {
  return std::string("scale on ") + (v.scale_on_q ? "Q" : "scores") + " by " +
         (v.scale_by_mul ? "Mul" : "Div") + ", mask " + std::to_string(static_cast<int>(v.mask)) +
         ", dropout " + std::to_string(v.dropout);
}

TEST(AttentionFusion, BlocksBecomeOneAttentionNode) {
  for (const Variant& v : fusable()) {
    if (v.read_kt) continue;  // ATransposeOthersReadIsKept
    ir::Graph g = block(v);
    EXPECT_EQ(ir::passes::fuse(g).attention, 1) << describe(v);
    g.infer_shapes();
    g.verify();
    EXPECT_EQ(count(g, "Softmax") + count(g, "Dropout") + count(g, "Div"), 0) << describe(v);
    ASSERT_EQ(count(g, "Attention"), 1) << describe(v);
    const auto at = std::find_if(g.nodes.begin(), g.nodes.end(),
                                 [](const ir::Node& n) { return n.op_type == "Attention"; });
    const ir::Node& a = *at;
    EXPECT_EQ(a.attr_float("scale", 0), 0.5f) << describe(v);
    EXPECT_EQ(a.attr_float("dropout", 0), v.dropout) << describe(v);
    EXPECT_EQ(a.inputs.size(), v.mask == Mask::kNone ? 3u : 4u) << describe(v);
    if (v.mask != Mask::kNone) {
      EXPECT_EQ(g.tensor(a.inputs[3]).shape, (ir::Shape{kSeq, kSeq})) << describe(v);
    }
    // The split of heads and their merge are read through, not run: it
    // stands where the merge's Transpose stood, before the Reshape to rows.
    EXPECT_EQ(count(g, "Transpose"), 0) << describe(v);
    EXPECT_EQ(a.attr_ints("q_perm"), (std::vector<int64_t>{0, 2, 1, 3})) << describe(v);
    EXPECT_EQ(a.attr_ints("k_perm"), (std::vector<int64_t>{0, 2, 3, 1})) << describe(v);
    EXPECT_EQ(a.attr_ints("v_perm"), (std::vector<int64_t>{0, 2, 1, 3})) << describe(v);
    EXPECT_EQ(a.attr_ints("o_perm"), (std::vector<int64_t>{0, 2, 1, 3})) << describe(v);
    EXPECT_EQ(g.tensor(a.inputs[0]).shape, (ir::Shape{kBatch, kSeq, kHeads, kHeadDim}));
    ASSERT_NE(at + 1, g.nodes.end());
    EXPECT_EQ((at + 1)->op_type, "Reshape");
  }
}

// A split of heads someone else also reads stays a Transpose, and the block
// reads its output as before while the other operands are read through.
TEST(AttentionFusion, ATransposeOthersReadIsKept) {
  Variant v;
  v.read_kt = true;
  ir::Graph g = block(v);
  EXPECT_EQ(ir::passes::fuse(g).attention, 1);
  g.infer_shapes();
  g.verify();
  EXPECT_EQ(count(g, "Transpose"), 1);
  const auto at = std::find_if(g.nodes.begin(), g.nodes.end(),
                               [](const ir::Node& n) { return n.op_type == "Attention"; });
  ASSERT_NE(at, g.nodes.end());
  EXPECT_FALSE(at->has_attr("k_perm"));
  EXPECT_EQ(at->inputs[1], "kt");
  EXPECT_TRUE(at->has_attr("q_perm") && at->has_attr("v_perm") && at->has_attr("o_perm"));
}

TEST(AttentionFusion, LossAndGradientsMatchTheUnfusedGraph) {
  const double eps = std::numeric_limits<float>::epsilon();
  std::mt19937_64 rng(8);
  std::vector<int64_t> labels(kBatch * kSeq);
  for (auto& l : labels) l = static_cast<int64_t>(rng() % kHidden);
  std::map<std::string, ir::Tensor> feeds = {
      {"x", test::random_tensor({kBatch, kSeq, kHidden}, test::Gen::kUniform, rng)},
      {"y", ir::Tensor::from_i64(labels, {kBatch * kSeq})}};
  auto backend = exec::make_cpu_backend();
  exec::RunOptions o;
  o.training = true;
  o.seed = 17;
  for (const Variant& v : fusable()) {
    ir::Graph plain = block(v), fused = block(v);
    ir::passes::fuse(fused);
    fused.infer_shapes();
    auto plain_grads = autodiff::build_backward(plain, "loss").grads;
    auto fused_grads = autodiff::build_backward(fused, "loss").grads;
    ASSERT_EQ(fused_grads.size(), 3u);
    auto a = exec::ForwardRunner(plain, *backend).run(feeds, o);
    auto b = exec::ForwardRunner(fused, *backend).run(feeds, o);
    // Both are the same few roundings deep, summed in other orders (K <= 8
    // products per GEMM element, softmax's gradient through rowsum(dO O)
    // instead of rowsum(dP P)): within 16 eps of the tensor's largest element
    // (4 on the machines seen).
    auto expect_close = [&](const ir::Tensor& x, const ir::Tensor& y, const std::string& what) {
      ASSERT_EQ(x.shape(), y.shape()) << what;
      double scale = 0, worst = 0;
      for (int64_t i = 0; i < y.numel(); ++i) scale = std::max(scale, std::abs(double(y.at(i))));
      for (int64_t i = 0; i < y.numel(); ++i)
        worst = std::max(worst, std::abs(double(x.at(i)) - double(y.at(i))));
      EXPECT_LE(worst, 16 * eps * scale) << what << " (" << describe(v) << "): largest " << scale;
    };
    expect_close(b.at("loss"), a.at("loss"), "loss");
    for (const auto& [param, grad] : plain_grads)
      expect_close(b.at(fused_grads.at(param)), a.at(grad), "d loss / d " + param);
  }
}

// Q (batch, Lq, 4), Kt (batch, 4, Lk), V (batch, Lk, 3) as parameters ->
// softmax(0.5 Q Kt + mask) V -> sum(O R): long enough that the kernel
// splits the work into blocks of several matrices or of some rows.
// `seq_first`: Q, K and V stored (L, batch, d) as PyTorch's MultiheadAttention
// has them, split into heads by Transposes and O merged back by one, which
// the fusion reads through (the kernel's gathered blocks).
ir::Graph long_attention(int64_t batch, int64_t lq, int64_t lk, bool seq_first = false) {
  std::mt19937_64 rng(11);
  ir::Graph g;
  auto param = [&](const std::string& name, ir::Shape s) {
    g.set_value(name, test::random_tensor(s, test::Gen::kUniform, rng), ir::Role::kParam);
  };
  auto node = [&](const std::string& op, std::vector<std::string> in, std::string out,
                  std::map<std::string, Attribute> attrs = {}) {
    g.nodes.push_back({"/" + out, op, std::move(in), {out}, std::move(attrs)});
  };
  auto perm = [](std::vector<int64_t> p) {
    return std::map<std::string, Attribute>{{"perm", Attribute(std::move(p))}};
  };
  if (seq_first) {
    param("q_seq", {lq, batch, 4});
    param("k_seq", {lk, batch, 4});
    param("v_seq", {lk, batch, 3});
    node("Transpose", {"q_seq"}, "q", perm({1, 0, 2}));
    node("Transpose", {"k_seq"}, "kt", perm({1, 2, 0}));
    node("Transpose", {"v_seq"}, "v", perm({1, 0, 2}));
  } else {
    param("q", {batch, lq, 4});
    param("kt", {batch, 4, lk});
    param("v", {batch, lk, 3});
  }
  const ir::Shape r_shape = seq_first ? ir::Shape{lq, batch, 3} : ir::Shape{batch, lq, 3};
  g.set_value("r", test::random_tensor(r_shape, test::Gen::kUniform, rng), ir::Role::kConstant);
  g.set_value("mask", test::random_tensor({lq, lk}, test::Gen::kUniform, rng), ir::Role::kConstant);
  g.set_value("half", ir::Tensor::scalar_f32(0.5f), ir::Role::kConstant);
  node("MatMul", {"q", "kt"}, "s0");
  node("Mul", {"s0", "half"}, "s1");
  node("Add", {"s1", "mask"}, "s");
  node("Softmax", {"s"}, "p", {{"axis", Attribute(int64_t{-1})}});
  node("MatMul", {"p", "v"}, "o");
  if (seq_first) node("Transpose", {"o"}, "o_seq", perm({1, 0, 2}));
  node("Mul", {seq_first ? "o_seq" : "o", "r"}, "or");
  node("ReduceSum", {"or"}, "loss", {{"keepdims", Attribute(int64_t{0})}});
  g.outputs = {"loss"};
  g.infer_shapes();
  g.verify();
  return g;
}

TEST(AttentionFusion, LongSequencesSplitIntoBlocksGiveTheUnfusedGradients) {
  auto backend = exec::make_cpu_backend();
  exec::RunOptions o;
  o.training = true;
  // 3 matrices of 600 x 600 (blocks of 2 and 1 matrices); 2 of 1030 x 1100
  // (blocks of 953 and 77 rows).
  // Each stored as the kernel reads it, and seq-first through absorbed Transposes.
  for (auto [batch, lq, lk, seq_first] :
       {std::tuple{3, 600, 600, false}, std::tuple{2, 1030, 1100, false},
        std::tuple{3, 600, 600, true}, std::tuple{2, 1030, 1100, true}}) {
    ir::Graph plain = long_attention(batch, lq, lk, seq_first),
              fused = long_attention(batch, lq, lk, seq_first);
    ASSERT_EQ(ir::passes::fuse_attention(fused), 1);
    EXPECT_EQ(count(fused, "Transpose"), 0);
    fused.infer_shapes();
    auto plain_grads = autodiff::build_backward(plain, "loss").grads;
    auto fused_grads = autodiff::build_backward(fused, "loss").grads;
    auto a = exec::ForwardRunner(plain, *backend).run({}, o);
    auto b = exec::ForwardRunner(fused, *backend).run({}, o);
    for (const auto& [param, grad] : plain_grads) {
      const ir::Tensor &x = b.at(fused_grads.at(param)), &y = a.at(grad);
      double scale = 0, worst = 0;
      for (int64_t i = 0; i < y.numel(); ++i) scale = std::max(scale, std::abs(double(y.at(i))));
      for (int64_t i = 0; i < y.numel(); ++i)
        worst = std::max(worst, std::abs(double(x.at(i)) - double(y.at(i))));
      // Sums over up to 1,100 keys in other orders: sqrt(1100) ~ 33 eps of
      // the largest element bounds them (6 seen).
      EXPECT_LE(worst, 33 * std::numeric_limits<float>::epsilon() * scale)
          << "d loss / d " << param << " at " << lq << " x " << lk << ": worst " << worst
          << " of largest " << scale;
    }
  }
}

// One packed projection x W (W: E x 3E) cut into Q, K and V: PyTorch's
// MultiheadAttention (sequence first (L, N, E), three Slices, heads merged
// with the batch: (L, N*H, d)) or GPT's (batch first (N, L, E), one Split,
// (N, L, H, d)); then heads split, attention, heads merged, rows, loss.
ir::Graph packed_block(bool seq_first) {
  std::mt19937_64 rng(5);
  constexpr int64_t kE = kHeads * kHeadDim;
  ir::Graph g;
  const ir::Shape x_shape = seq_first ? ir::Shape{kSeq, kBatch, kE} : ir::Shape{kBatch, kSeq, kE};
  g.set_tensor({"x", ir::DType::kF32, x_shape, ir::Role::kInput});
  g.set_tensor({"y", ir::DType::kI64, {kBatch * kSeq}, ir::Role::kInput});
  g.inputs = {"x", "y"};
  g.set_value("w", test::random_tensor({kE, 3 * kE}, test::Gen::kUniform, rng), ir::Role::kParam);
  g.set_value("c", ir::Tensor::scalar_f32(2.0f), ir::Role::kConstant);
  const ir::Shape heads = seq_first ? ir::Shape{kSeq, kBatch * kHeads, kHeadDim}
                                    : ir::Shape{kBatch, kSeq, kHeads, kHeadDim};
  g.set_value("heads", ir::Tensor::from_i64(heads, {static_cast<int64_t>(heads.size())}),
              ir::Role::kConstant);
  g.set_value("rows", ir::Tensor::from_i64({kBatch * kSeq, kE}, {2}), ir::Role::kConstant);
  auto node = [&](const std::string& name, const std::string& op, std::vector<std::string> in,
                  std::vector<std::string> out, std::map<std::string, Attribute> attrs = {}) {
    g.nodes.push_back({name, op, std::move(in), std::move(out), std::move(attrs)});
  };
  auto perm = [](std::vector<int64_t> p) {
    return std::map<std::string, Attribute>{{"perm", Attribute(std::move(p))}};
  };
  node("/proj", "MatMul", {"x", "w"}, {"qkv"});
  if (seq_first) {
    for (int64_t k = 0; k < 3; ++k) {
      const std::string i = std::to_string(k);
      g.set_value("lo" + i, ir::Tensor::from_i64({k * kE}, {1}), ir::Role::kConstant);
      g.set_value("hi" + i, ir::Tensor::from_i64({(k + 1) * kE}, {1}), ir::Role::kConstant);
      g.set_value("ax" + i, ir::Tensor::from_i64({-1}, {1}), ir::Role::kConstant);
      node("/slice" + i, "Slice", {"qkv", "lo" + i, "hi" + i, "ax" + i}, {"part" + i});
    }
  } else {
    g.set_value("sizes", ir::Tensor::from_i64({kE, kE, kE}, {3}), ir::Role::kConstant);
    node("/split", "Split", {"qkv", "sizes"}, {"part0", "part1", "part2"},
         {{"axis", Attribute(int64_t{2})}});
  }
  const std::vector<int64_t> split_heads =
      seq_first ? std::vector<int64_t>{1, 0, 2} : std::vector<int64_t>{0, 2, 1, 3};
  const std::vector<int64_t> keys =
      seq_first ? std::vector<int64_t>{1, 2, 0} : std::vector<int64_t>{0, 2, 3, 1};
  const char* names[] = {"q", "k", "v"};
  for (int64_t k = 0; k < 3; ++k) {
    const std::string t = names[k], i = std::to_string(k);
    node("/" + t + "/Reshape", "Reshape", {"part" + i, "heads"}, {t + "r"});
    node("/" + t + "/Transpose", "Transpose", {t + "r"}, {t == "k" ? "kt" : t + "h"},
         perm(t == "k" ? keys : split_heads));
  }
  node("/attn/ScaleQ", "Div", {"qh", "c"}, {"qs"});  // as MultiheadAttention scales Q
  node("/attn/MatMul", "MatMul", {"qs", "kt"}, {"s"});
  node("/attn/Softmax", "Softmax", {"s"}, {"p"}, {{"axis", Attribute(int64_t{-1})}});
  node("/attn/MatMul_1", "MatMul", {"p", "vh"}, {"o"});
  node("/attn/Merge", "Transpose", {"o"}, {"om"}, perm(split_heads));
  node("/attn/Rows", "Reshape", {"om", "rows"}, {"logits"});
  node("/loss", "SoftmaxCrossEntropyLoss", {"logits", "y"}, {"loss"});
  g.outputs = {"loss"};
  g.infer_shapes();
  g.verify();
  return g;
}

TEST(AttentionFusion, APackedProjectionIsReadInPlaceAndItsGradientWrittenAsOne) {
  const double eps = std::numeric_limits<float>::epsilon();
  auto backend = exec::make_cpu_backend();
  for (bool seq_first : {true, false}) {
    const std::string what = seq_first ? "slices, sequence first" : "split, batch first";
    ir::Graph plain = packed_block(seq_first), fused = packed_block(seq_first);
    EXPECT_EQ(ir::passes::fuse(fused).attention, 1) << what;
    fused.infer_shapes();
    fused.verify();
    for (const char* op : {"Slice", "Split", "Reshape", "Transpose"})
      EXPECT_EQ(count(fused, op), op == std::string("Reshape") ? 1 : 0) << what << ": " << op;
    auto plain_grads = autodiff::build_backward(plain, "loss").grads;
    auto fused_grads = autodiff::build_backward(fused, "loss").grads;
    // One gradient for the packed projection: no SliceGrad, Concat or Add of parts.
    EXPECT_EQ(count(fused, "AttentionGrad"), 1) << what;
    for (const char* op : {"SliceGrad", "Concat", "Add", "Transpose"})
      EXPECT_EQ(count(fused, op), 0) << what << ": " << op;
    std::mt19937_64 rng(9);
    std::vector<int64_t> labels(kBatch * kSeq);
    for (auto& l : labels) l = static_cast<int64_t>(rng() % (kHeads * kHeadDim));
    std::map<std::string, ir::Tensor> feeds = {
        {"x", test::random_tensor(plain.tensor("x").shape, test::Gen::kUniform, rng)},
        {"y", ir::Tensor::from_i64(labels, {kBatch * kSeq})}};
    exec::RunOptions o;
    o.training = true;
    // The CPU backend, and the portable one (the shared kernel CUDA runs too).
    auto portable = exec::make_portable_backend();
    auto a = exec::ForwardRunner(plain, *backend).run(feeds, o);
    for (exec::Backend* run_on : {backend.get(), portable.get()}) {
      auto b = exec::ForwardRunner(fused, *run_on).run(feeds, o);
      // As LossAndGradientsMatchTheUnfusedGraph: the same roundings summed in
      // other orders, within 16 eps of the largest element.
      for (const auto& [name, x, y] :
           {std::tuple{std::string("loss"), b.at("loss"), a.at("loss")},
            std::tuple{std::string("d loss / d w"), b.at(fused_grads.at("w")),
                       a.at(plain_grads.at("w"))}}) {
        ASSERT_EQ(x.shape(), y.shape()) << name;
        double scale = 0, worst = 0;
        for (int64_t i = 0; i < y.numel(); ++i) scale = std::max(scale, std::abs(double(y.at(i))));
        for (int64_t i = 0; i < y.numel(); ++i)
          worst = std::max(worst, std::abs(double(x.at(i)) - double(y.at(i))));
        EXPECT_LE(worst, 16 * eps * scale)
            << what << " on " << run_on->name() << ", " << name << ": largest " << scale;
        EXPECT_GT(scale, 0) << what << ", " << name;
      }
    }
  }
}

// The gathered blocks shared out over two threads (a worker each, its own
// scratch) give the gradients one thread gives: each block is the same
// products on one thread either way.
TEST(AttentionFusion, GatheredBlocksShareOutOverThreads) {
  auto backend = exec::make_cpu_backend();
  exec::RunOptions o;
  o.training = true;
  for (auto [batch, lq, lk] : {std::tuple{3, 600, 600}, std::tuple{2, 1030, 1100}}) {
    ir::Graph g = long_attention(batch, lq, lk, /*seq_first=*/true);
    ASSERT_EQ(ir::passes::fuse_attention(g), 1);
    g.infer_shapes();
    auto grads = autodiff::build_backward(g, "loss").grads;
    const int saved = exec::cpu::dnnl_threads();
    exec::cpu::set_dnnl_threads(1);
    auto one = exec::ForwardRunner(g, *backend).run({}, o);
    exec::cpu::set_dnnl_threads(2);
    // No loop of these sizes splits at this minimum (so only the workers
    // fork: their work is priced far above it).
    const int64_t min_work = exec::cpu::parallel_min_work();
    exec::cpu::set_parallel_min_work(int64_t{1} << 36, exec::cpu::parallel_max_align());
    const int64_t forks = exec::cpu::parallel_forks();
    auto two = exec::ForwardRunner(g, *backend).run({}, o);
    EXPECT_GT(exec::cpu::parallel_forks(), forks) << "the blocks were not shared out";
    exec::cpu::set_parallel_min_work(min_work, exec::cpu::parallel_max_align());
    exec::cpu::set_dnnl_threads(saved);
    for (const auto& [param, grad] : grads) {
      const ir::Tensor &x = two.at(grad), &y = one.at(grad);
      double scale = 0, worst = 0;
      for (int64_t i = 0; i < y.numel(); ++i) scale = std::max(scale, std::abs(double(y.at(i))));
      for (int64_t i = 0; i < y.numel(); ++i)
        worst = std::max(worst, std::abs(double(x.at(i)) - double(y.at(i))));
      // oneDNN may block a product differently inside a thread's region.
      EXPECT_LE(worst, 33 * std::numeric_limits<float>::epsilon() * scale)
          << "d loss / d " << param << " at " << lq << " x " << lk;
    }
  }
}

TEST(AttentionFusion, BlocksItCannotReplaceAreLeftAlone) {
  Variant read;
  read.read_probs = true;  // the probabilities are a graph output
  Variant input_mask;
  input_mask.mask = Mask::kInput;  // the mask is not a constant
  Variant axis;
  axis.softmax_axis = 2;  // softmax over the queries
  for (const Variant& v : {read, input_mask, axis}) {
    ir::Graph g = block(v);
    const size_t nodes = g.nodes.size();
    EXPECT_EQ(ir::passes::fuse_attention(g), 0);
    EXPECT_EQ(g.nodes.size(), nodes);
    EXPECT_EQ(count(g, "Softmax"), 1);
  }
}

}  // namespace
}  // namespace pipetrain
