// Constant folding: the import-time evaluator op by op, and folding of a
// PyTorch-style shape subgraph through the whole import.
#include <gtest/gtest.h>

#include <limits>

#include "importer/internal.h"
#include "ir/error.h"
#include "tests/importer/model_util.h"

namespace pipetrain {
namespace {

using ir::DType;
using ir::Tensor;

// Folds one node whose inputs are constants (names c0, c1, ...).
std::optional<Tensor> fold(const std::string& op, const std::vector<Tensor>& inputs,
                           std::map<std::string, ir::Attribute> attrs = {},
                           ir::Role role = ir::Role::kConstant) {
  ir::Graph g;
  ir::Node n{"n", op, {}, {"out"}, std::move(attrs)};
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name("c");
    name += std::to_string(i);
    if (inputs[i].defined()) g.set_value(name, inputs[i], role);
    n.inputs.push_back(inputs[i].defined() ? name : "");
  }
  auto out = importer::detail::fold_node(g, n);
  if (!out) return std::nullopt;
  EXPECT_EQ(out->size(), 1u);
  return (*out)[0];
}

Tensor i64(std::vector<int64_t> v) {
  return Tensor::from_i64(v, {static_cast<int64_t>(v.size())});
}
Tensor i64s(int64_t v) {
  return Tensor::from_i64({v}, {});
}
Tensor f32(std::vector<float> v) {
  return Tensor::from_f32(v, {static_cast<int64_t>(v.size())});
}

std::vector<float> floats(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

TEST(Folding, GatherConcatUnsqueezeSqueeze) {
  auto g = fold("Gather", {i64({5, 6, 7}), i64s(-1)}, {{"axis", int64_t{0}}});
  ASSERT_TRUE(g);
  EXPECT_EQ(g->shape(), ir::Shape{});
  EXPECT_EQ(g->to_i64(), std::vector<int64_t>{7});
  EXPECT_FALSE(fold("Gather", {i64({5, 6, 7}), i64s(3)})) << "index out of range";

  Tensor m = Tensor::from_i64({1, 2, 3, 4, 5, 6}, {2, 3});
  auto cols = fold("Gather", {m, i64({2, 0})}, {{"axis", int64_t{1}}});
  ASSERT_TRUE(cols);
  EXPECT_EQ(cols->shape(), (ir::Shape{2, 2}));
  EXPECT_EQ(cols->to_i64(), (std::vector<int64_t>{3, 1, 6, 4}));

  auto c = fold("Concat", {i64({1}), i64({-1, 4})}, {{"axis", int64_t{0}}});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->to_i64(), (std::vector<int64_t>{1, -1, 4}));
  auto rows = fold("Concat", {m, m}, {{"axis", int64_t{-1}}});
  ASSERT_TRUE(rows);
  EXPECT_EQ(rows->shape(), (ir::Shape{2, 6}));
  EXPECT_EQ(rows->to_i64(), (std::vector<int64_t>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));

  auto u = fold("Unsqueeze", {i64s(3), i64({0, -1})});
  ASSERT_TRUE(u);
  EXPECT_EQ(u->shape(), (ir::Shape{1, 1}));
  auto ua = fold("Unsqueeze", {i64({3, 4})}, {{"axes", std::vector<int64_t>{1}}});
  ASSERT_TRUE(ua) << "opset < 13 attribute form";
  EXPECT_EQ(ua->shape(), (ir::Shape{2, 1}));

  auto s = fold("Squeeze", {Tensor::from_i64({9}, {1, 1})});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->shape(), ir::Shape{});
  EXPECT_FALSE(fold("Squeeze", {i64({1, 2}), i64({0})})) << "axis 0 has size 2";
}

TEST(Folding, SliceClampsAndSteps) {
  Tensor x = i64({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  auto tail = fold("Slice", {x, i64({2}), i64({kMax})});
  ASSERT_TRUE(tail);
  EXPECT_EQ(tail->to_i64(), (std::vector<int64_t>{2, 3, 4, 5, 6, 7, 8, 9}));
  auto back = fold("Slice", {x, i64({-1}), i64({kMin}), i64({0}), i64({-3})});
  ASSERT_TRUE(back);
  EXPECT_EQ(back->to_i64(), (std::vector<int64_t>{9, 6, 3, 0}));
  auto empty = fold("Slice", {x, i64({5}), i64({2})});
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->shape(), (ir::Shape{0}));
  Tensor m = Tensor::from_i64({1, 2, 3, 4, 5, 6}, {2, 3});
  auto col = fold("Slice", {m, i64({1}), i64({2}), i64({-1})});
  ASSERT_TRUE(col);
  EXPECT_EQ(col->shape(), (ir::Shape{2, 1}));
  EXPECT_EQ(col->to_i64(), (std::vector<int64_t>{2, 5}));
  EXPECT_FALSE(fold("Slice", {x, i64({0}), i64({3}), i64({0}), i64({0})})) << "zero step";
}

// PyTorch's ReflectionPad2d computes its pads through a Transpose of a constant.
TEST(Folding, TransposeAnyPermutation) {
  Tensor m = Tensor::from_i64({1, 2, 3, 4, 5, 6}, {2, 3});
  auto t = fold("Transpose", {m});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->shape(), (ir::Shape{3, 2}));
  EXPECT_EQ(t->to_i64(), (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));
  Tensor c = Tensor::from_f32({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 3, 2});
  auto p = fold("Transpose", {c}, {{"perm", ir::Attribute(std::vector<int64_t>{1, 2, 0})}});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->shape(), (ir::Shape{3, 2, 2}));
  EXPECT_EQ(floats(*p), (std::vector<float>{0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11}));
  EXPECT_FALSE(fold("Transpose", {c}, {{"perm", ir::Attribute(std::vector<int64_t>{0, 0, 1})}}))
      << "a repeated axis";
}

TEST(Folding, Arithmetic) {
  auto sum = fold("Add", {Tensor::from_i64({10, 20}, {2, 1}), i64({1, 2, 3})});
  ASSERT_TRUE(sum);
  EXPECT_EQ(sum->shape(), (ir::Shape{2, 3}));
  EXPECT_EQ(sum->to_i64(), (std::vector<int64_t>{11, 12, 13, 21, 22, 23}));
  auto q = fold("Div", {i64({-7, 7}), i64s(2)});
  ASSERT_TRUE(q);
  EXPECT_EQ(q->to_i64(), (std::vector<int64_t>{-3, 3})) << "truncation toward zero";
  EXPECT_FALSE(fold("Div", {i64({1}), i64({0})}));
  EXPECT_FALSE(fold("Mul", {i64s(std::numeric_limits<int64_t>::max()), i64s(2)})) << "overflow";
  EXPECT_FALSE(fold("Add", {i64({1}), f32({1.0f})})) << "mixed dtypes";
  auto prod = fold("Mul", {f32({1.5f, 2.0f}), f32({2.0f})});
  ASSERT_TRUE(prod);
  EXPECT_EQ(floats(*prod), (std::vector<float>{3.0f, 4.0f}));
  auto neg = fold("Neg", {i64({3, -4})});
  ASSERT_TRUE(neg);
  EXPECT_EQ(neg->to_i64(), (std::vector<int64_t>{-3, 4}));
}

// PyTorch 2's export of multi-head attention computes a Slice bound as
// Mod(Add(c, c), c): it must fold, in both of Mod's sign conventions.
TEST(Folding, ModBothSigns) {
  auto floor = fold("Mod", {i64({7, -7, 7, -7}), i64({3, 3, -3, -3})});
  ASSERT_TRUE(floor);
  EXPECT_EQ(floor->to_i64(), (std::vector<int64_t>{1, 2, -2, -1})) << "the divisor's sign";
  auto trunc = fold("Mod", {i64({7, -7, 7, -7}), i64({3, 3, -3, -3})}, {{"fmod", int64_t{1}}});
  ASSERT_TRUE(trunc);
  EXPECT_EQ(trunc->to_i64(), (std::vector<int64_t>{1, -1, 1, -1})) << "the dividend's sign";
  EXPECT_FALSE(fold("Mod", {i64({1}), i64({0})})) << "mod 0 is left to the kernel";
  auto f = fold("Mod", {f32({5.5f, -5.5f}), f32({2.0f})}, {{"fmod", int64_t{1}}});
  ASSERT_TRUE(f);
  EXPECT_EQ(floats(*f), (std::vector<float>{1.5f, -1.5f}));
}

TEST(Folding, EqualWhereCast) {
  auto eq = fold("Equal", {i64({1, -1, 3}), i64s(-1)});
  ASSERT_TRUE(eq);
  EXPECT_EQ(eq->dtype(), DType::kBool);
  EXPECT_EQ(eq->to_i64(), (std::vector<int64_t>{0, 1, 0}));
  auto w = fold("Where", {*eq, i64s(1), i64({4, 5, 6})});
  ASSERT_TRUE(w);
  EXPECT_EQ(w->to_i64(), (std::vector<int64_t>{4, 1, 6}));
  auto c = fold("Cast", {f32({-2.7f, 3.9f})}, {{"to", int64_t{7}}});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->dtype(), DType::kI64);
  EXPECT_EQ(c->to_i64(), (std::vector<int64_t>{-2, 3}));
  auto f = fold("Cast", {i64({5})}, {{"to", int64_t{1}}});
  ASSERT_TRUE(f);
  EXPECT_EQ(floats(*f), std::vector<float>{5.0f});
  EXPECT_FALSE(fold("Cast", {i64({5})}, {{"to", int64_t{11}}})) << "to double: not ours";
}

TEST(Folding, ConstantOfShapeRangeExpandReshape) {
  auto z = fold("ConstantOfShape", {i64({2, 3})});
  ASSERT_TRUE(z);
  EXPECT_EQ(z->dtype(), DType::kF32);
  EXPECT_EQ(z->shape(), (ir::Shape{2, 3}));
  auto k = fold("ConstantOfShape", {i64({2})}, {{"value", Tensor::from_i64({7}, {1})}});
  ASSERT_TRUE(k);
  EXPECT_EQ(k->to_i64(), (std::vector<int64_t>{7, 7}));

  auto r = fold("Range", {i64s(0), i64s(10), i64s(3)});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->to_i64(), (std::vector<int64_t>{0, 3, 6, 9}));
  auto down = fold("Range", {i64s(5), i64s(1), i64s(-2)});
  ASSERT_TRUE(down);
  EXPECT_EQ(down->to_i64(), (std::vector<int64_t>{5, 3}));
  auto fr = fold("Range",
                 {Tensor::scalar_f32(1.0f), Tensor::scalar_f32(2.0f), Tensor::scalar_f32(0.25f)});
  ASSERT_TRUE(fr);
  EXPECT_EQ(floats(*fr), (std::vector<float>{1.0f, 1.25f, 1.5f, 1.75f}));

  auto e = fold("Expand", {i64({1, 2}), i64({2, 1})});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->shape(), (ir::Shape{2, 2}));
  EXPECT_EQ(e->to_i64(), (std::vector<int64_t>{1, 2, 1, 2}));

  Tensor m = Tensor::from_i64({1, 2, 3, 4, 5, 6}, {2, 3});
  auto rs = fold("Reshape", {m, i64({0, -1, 1})});
  ASSERT_TRUE(rs);
  EXPECT_EQ(rs->shape(), (ir::Shape{2, 3, 1}));
  EXPECT_FALSE(fold("Reshape", {m, i64({4, -1})}));
}

TEST(Folding, ShapeNeedsOnlyTheStaticShape) {
  ir::Graph g;
  g.set_tensor({"x", DType::kF32, {2, 3, 4}, ir::Role::kInput});
  ir::Node n{"s", "Shape", {"x"}, {"s_out"}, {{"start", int64_t{1}}, {"end", int64_t{-1}}}};
  auto out = importer::detail::fold_node(g, n);
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)[0].to_i64(), std::vector<int64_t>{3});
}

TEST(Folding, ParametersNeverFold) {
  EXPECT_FALSE(fold("Mul", {f32({1.0f}), f32({2.0f})}, {}, ir::Role::kParam));
  EXPECT_FALSE(fold("Identity", {f32({1.0f})}, {}, ir::Role::kBuffer));
}

// The subgraph torch.flatten(x, 1) exports to: Shape -> Gather -> Unsqueeze
// -> Concat -> Reshape. After folding only the Reshape is left, reading a
// constant shape.
TEST(Folding, PyTorchFlattenSubgraphFoldsAway) {
  const char* text = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 3, 4] x) => (float[N, 12] y) <int64[1] ax = {0}>
{
  s = Shape(x)
  i = Constant<value_int = 0>()
  d = Gather<axis = 0>(s, i)
  u = Unsqueeze(d, ax)
  m = Constant<value_ints = [-1]>()
  shape = Concat<axis = 0>(u, m)
  y = Reshape(x, shape)
}
)";
  importer::ImportOptions o;
  o.batch = 5;
  ir::Graph g = test::import_text(text, o);
  ASSERT_EQ(g.nodes.size(), 1u) << ir::dump(g);
  EXPECT_EQ(g.nodes[0].op_type, "Reshape");
  EXPECT_EQ(g.value("shape")->to_i64(), (std::vector<int64_t>{5, -1}));
  EXPECT_EQ(g.tensor("shape").role, ir::Role::kConstant);
  EXPECT_EQ(g.tensor("y").shape, (ir::Shape{5, 12}));
  EXPECT_FALSE(g.has_tensor("s")) << "intermediate constants nothing reads are dropped";
  EXPECT_FALSE(g.has_tensor("ax"));

  o.fold_constants = false;
  auto msg = test::error_of<ModelError>([&] { test::import_text(text, o); });
  EXPECT_NE(msg.find("must be a constant"), std::string::npos) << msg;
}

TEST(Folding, FoldingCanBeTurnedOff) {
  const char* text = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (int64[2] x) => (int64[2] y) <int64[2] a = {1, 2}, int64[2] b = {3, 4}>
{
  c = Add(a, b)
  y = Add(x, c)
}
)";
  ir::Graph folded = test::import_text(text);
  ASSERT_EQ(folded.nodes.size(), 1u);
  EXPECT_EQ(folded.value("c")->to_i64(), (std::vector<int64_t>{4, 6}));
  importer::ImportOptions o;
  o.fold_constants = false;
  EXPECT_EQ(test::import_text(text, o).nodes.size(), 2u);
}

}  // namespace
}  // namespace pipetrain
