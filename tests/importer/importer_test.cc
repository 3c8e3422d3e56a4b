// ModelProto -> Graph: inputs, values and roles, names, opsets, errors.
#include "importer/importer.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "ir/error.h"
#include "tests/importer/model_util.h"

namespace pipetrain {
namespace {

using test::error_of;
using test::import_proto;
using test::import_text;
using test::parse_model;

constexpr const char* kAddRelu = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] y) <float[3] w = {1.0, 2.0, 3.0}, float[2] unused = {5.0, 6.0}>
{
  t = Add(x, w)
  y = Relu(t)
}
)";

TEST(Importer, BuildsNodesValuesAndShapes) {
  auto m = parse_model(kAddRelu);
  test::name_nodes(m, {"/block/Add", "/block/Relu"});
  ir::Graph g = import_proto(m);
  EXPECT_EQ(g.opset, 17);
  EXPECT_EQ(g.name, "g");
  EXPECT_EQ(g.inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(g.outputs, std::vector<std::string>{"y"});
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].op_type, "Add");
  EXPECT_EQ(g.nodes[0].name, "/block/Add");
  EXPECT_EQ(g.nodes[1].inputs, std::vector<std::string>{"t"});
  EXPECT_EQ(g.tensor("x").role, ir::Role::kInput);
  EXPECT_EQ(g.tensor("t").shape, (ir::Shape{2, 3}));
  EXPECT_EQ(g.tensor("t").role, ir::Role::kActivation);
  EXPECT_EQ(g.tensor("w").role, ir::Role::kParam);
  const ir::Tensor* w = g.value("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape(), (ir::Shape{3}));
  EXPECT_EQ(w->data<float>()[2], 3.0f);
  EXPECT_FALSE(g.has_tensor("unused")) << "an initializer nothing reads is dropped";
  // layer_depth 0: one layer per node, named after it.
  ASSERT_EQ(g.layers.size(), 2u);
  EXPECT_EQ(g.layers[1].name, "/block/Relu");
  EXPECT_EQ(g.nodes[1].layer, 1);
}

TEST(Importer, IntegerInitializersAreConstants) {
  ir::Graph g = import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[6] y) <int64[1] s = {6}>
{
  y = Reshape(x, s)
}
)");
  EXPECT_EQ(g.tensor("s").role, ir::Role::kConstant);
  EXPECT_EQ(g.tensor("y").shape, (ir::Shape{6}));
}

TEST(Importer, BatchNormRunningStatsAreBuffers) {
  ir::Graph g = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[1, 2, 2, 2] x) => (float[1, 2, 2, 2] y)
  <float[2] scale = {1.0, 1.0}, float[2] bias = {0.0, 0.0}, float[2] mean = {0.0, 0.5},
   float[2] var = {1.0, 2.0}>
{
  y = BatchNormalization(x, scale, bias, mean, var)
}
)");
  EXPECT_EQ(g.tensor("scale").role, ir::Role::kParam);
  EXPECT_EQ(g.tensor("bias").role, ir::Role::kParam);
  EXPECT_EQ(g.tensor("mean").role, ir::Role::kBuffer);
  EXPECT_EQ(g.tensor("var").role, ir::Role::kBuffer);
}

TEST(Importer, InitializerListedAsInputIsAValue) {
  ir::Graph g = import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x, float[3] w = {1.0, 2.0, 3.0}) => (float[2, 3] y)
{
  y = Add(x, w)
}
)");
  EXPECT_EQ(g.inputs, std::vector<std::string>{"x"});
  EXPECT_TRUE(g.has_value("w"));
  EXPECT_EQ(g.tensor("w").role, ir::Role::kParam);
}

TEST(Importer, ConstantNodesBecomeConstantValues) {
  ir::Graph g = import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] y)
{
  c = Constant<value = float[3] {0.5, 1.5, 2.5}>()
  y = Mul(x, c)
}
)");
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Mul");
  EXPECT_EQ(g.tensor("c").role, ir::Role::kConstant);
  EXPECT_EQ(g.value("c")->data<float>()[1], 1.5f);
}

TEST(Importer, ConstantScalarAttributeForms) {
  ir::Graph g = import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] y)
{
  c = Constant<value_float = 2.0>()
  y = Mul(x, c)
}
)");
  const ir::Tensor* c = g.value("c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->dtype(), ir::DType::kF32);
  EXPECT_EQ(c->shape(), ir::Shape{});
  EXPECT_EQ(c->data<float>()[0], 2.0f);
}

constexpr const char* kDynamic = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch_size, 3] x) => (float[batch_size, 3] y)
{
  y = Relu(x)
}
)";

TEST(Importer, DynamicLeadingDimensionNeedsBatch) {
  auto msg = error_of<ModelError>([] { import_text(kDynamic); });
  EXPECT_NE(msg.find("input 'x' has dynamic dimension 'batch_size' at axis 0: pass --batch N"),
            std::string::npos)
      << msg;
  importer::ImportOptions o;
  o.batch = 8;
  ir::Graph g = import_text(kDynamic, o);
  EXPECT_EQ(g.tensor("x").shape, (ir::Shape{8, 3}));
  EXPECT_EQ(g.tensor("y").shape, (ir::Shape{8, 3}));
}

TEST(Importer, ExplicitInputShapesWinAndAreChecked) {
  importer::ImportOptions o;
  o.batch = 8;
  o.input_shapes["x"] = {5, 3};
  EXPECT_EQ(import_text(kDynamic, o).tensor("x").shape, (ir::Shape{5, 3}));
  o.input_shapes["x"] = {5, 4};
  auto msg = error_of<ModelError>([&] { import_text(kDynamic, o); });
  EXPECT_NE(msg.find("axis 1"), std::string::npos) << msg;
  o.input_shapes = {{"nope", {1}}};
  msg = error_of<ModelError>([&] { import_text(kDynamic, o); });
  EXPECT_NE(msg.find("'nope'"), std::string::npos) << msg;
}

TEST(Importer, DynamicInnerDimensionIsNamed) {
  auto msg = error_of<ModelError>([] {
    importer::ImportOptions o;
    o.batch = 2;
    import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, seq] x) => (float[2, seq] y)
{
  y = Relu(x)
}
)",
                o);
  });
  EXPECT_NE(msg.find("input 'x' has dynamic dimension 'seq' at axis 1"), std::string::npos) << msg;
}

TEST(Importer, InputValuesBecomeConstants) {
  importer::ImportOptions o;
  o.input_values["s"] = ir::Tensor::from_i64({3, 2}, {2});
  ir::Graph g = import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x, int64[2] s) => (float[3, 2] y)
{
  y = Reshape(x, s)
}
)",
                            o);
  EXPECT_EQ(g.inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(g.tensor("s").role, ir::Role::kConstant);
  EXPECT_EQ(g.tensor("y").shape, (ir::Shape{3, 2}));
}

TEST(Importer, UnsupportedOpsAreListedAllAtOnce) {
  auto m = parse_model(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x) => (float[3] y)
{
  a = NonZero(x)
  b = Unique(a)
  c = NonZero(b)
  d = Relu(c)
  y = Relu(d)
}
)");
  test::name_nodes(m, {"s1", "", "s2", "fused", "r"});
  m.mutable_graph()->mutable_node(3)->set_domain("com.microsoft");
  auto msg = error_of<UnsupportedOp>([&] { import_proto(m); });
  EXPECT_NE(msg.find("4 nodes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NonZero ('s1', 's2')"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Unique ('Unique_1')"), std::string::npos) << msg;
  EXPECT_NE(msg.find("com.microsoft::Relu ('fused')"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("'r'"), std::string::npos) << msg;
}

// Expanded ops become the ops of their ONNX definition; the output keeps its
// name and shape, and a bad one is refused naming the node.
TEST(Importer, ExpandedOpsBecomeTheirDefinition) {
  ir::Graph g = import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 8, 2, 3] x) => (float[1, 2, 4, 6] y)
{
  y = DepthToSpace <blocksize = 2, mode = "CRD"> (x)
}
)");
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.op_type);
  EXPECT_EQ(ops, (std::vector<std::string>{"Reshape", "Transpose", "Reshape"}));
  EXPECT_EQ(g.tensor("y").shape, (ir::Shape{1, 2, 4, 6}));
  auto msg = error_of<ModelError>([&] {
    import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 6, 2, 2] x) => (float[1, 1, 4, 4] y)
{
  y = DepthToSpace <blocksize = 2> (x)
}
)");
  });
  EXPECT_NE(msg.find("DepthToSpace"), std::string::npos) << msg;
  EXPECT_NE(msg.find("6 channels do not split into blocks of 2 x 2"), std::string::npos) << msg;
}

// Operands that decide an expanded op's output shape must be constants.
TEST(Importer, ExpandedOpsRefuseShapeDecidingInputs) {
  auto msg = error_of<ModelError>([] {
    import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[3, 2] x, bool[3] keep) => (float[2, 2] y)
{
  y = Compress <axis = 0> (x, keep)
}
)");
  });
  EXPECT_NE(msg.find("Compress"), std::string::npos) << msg;
  EXPECT_NE(msg.find("condition 'keep' is not a constant"), std::string::npos) << msg;
  msg = error_of<ModelError>([] {
    import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 2] x, int64[2] lens) => (float[4, 2] y)
{
  y = ReverseSequence <time_axis = 0, batch_axis = 1> (x, lens)
}
)");
  });
  EXPECT_NE(msg.find("sequence_lens 'lens' is not a constant"), std::string::npos) << msg;
}

TEST(Importer, UnsupportedDtypeNamesTheTensor) {
  auto msg = error_of<UnsupportedOp>([] {
    import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (complex64[3] x) => (complex64[3] y)
{
  y = Relu(x)
}
)");
  });
  EXPECT_NE(msg.find("input 'x' has dtype complex64"), std::string::npos) << msg;
}

// float64 runs as float32: inputs, outputs, initializers and Cast targets.
TEST(Importer, Float64IsComputedInFloat32) {
  ir::Graph g = import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (double[3] x) => (double[3] y)
<double[3] w = {0.5, 1.5, 2.5}>
{
  a = Mul(x, w)
  b = Cast<to = 1>(a)
  y = Cast<to = 11>(b)
}
)");
  EXPECT_EQ(g.tensor("x").dtype, ir::DType::kF32);
  EXPECT_EQ(g.tensor("y").dtype, ir::DType::kF32);
  ASSERT_NE(g.value("w"), nullptr);
  EXPECT_EQ(g.value("w")->dtype(), ir::DType::kF32);
  EXPECT_EQ(g.value("w")->data<float>()[2], 2.5f);
}

TEST(Importer, UnnamedAndDuplicateNodesGetUniqueNames) {
  auto m = parse_model(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x) => (float[3] y)
{
  a = Relu(x)
  b = Relu(a)
  y = Relu(b)
}
)");
  test::name_nodes(m, {"n", "n", ""});
  ir::Graph g = import_proto(m);
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[0].name, "n");
  EXPECT_EQ(g.nodes[1].name, "n_1");
  EXPECT_EQ(g.nodes[2].name, "Relu_2");
}

TEST(Importer, NodesAreSortedTopologically) {
  auto m = parse_model(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x) => (float[3] y)
{
  y = Relu(a)
  a = Relu(x)
}
)");
  test::name_nodes(m, {"second", "first"});
  // libonnx's checker insists on file order being topological; the IR does not.
  m.mutable_opset_import(0)->set_version(19);
  ir::Graph g = import_proto(m);
  EXPECT_EQ(g.nodes[0].name, "first");
  EXPECT_EQ(g.nodes[1].name, "second");
}

TEST(Importer, OpsetRange) {
  auto with_opset = [](int opset) {
    std::ostringstream text;
    text << "<ir_version: 8, opset_import: [\"\" : " << opset << R"(]>
g (float[3] x) => (float[3] y)
{
  y = Relu(x)
}
)";
    return parse_model(text.str());
  };
  EXPECT_EQ(import_proto(with_opset(21)).opset, 21) << "18..21 import without libonnx";
  EXPECT_EQ(import_proto(with_opset(9)).opset, 11) << "old opsets are converted to 11";
  auto msg = error_of<UnsupportedOp>([&] { import_proto(with_opset(22)); });
  EXPECT_NE(msg.find("opset 22"), std::string::npos) << msg;
}

// Found by fuzzing: libonnx's Gemm-6 shape rule indexes a rank-0 input and
// segfaults. The conversion runs isolated, so this is an error, not a crash.
TEST(Importer, MalformedLegacyModelFailsConversionCleanly) {
  auto m = parse_model(R"(
<ir_version: 7, opset_import: ["" : 6]>
g (float a, float[7, 68] b, float[1, 4] c) => (float[2, 4] y)
{
  y = Gemm<beta = 0.5>(a, b, c)
}
)");
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  auto msg = error_of<ModelError>([&] { import_proto(m); });
  EXPECT_NE(msg.find("opset 6 could not be converted to opset 11"), std::string::npos) << msg;
}

TEST(Importer, OldSoftmaxIsRewrittenToOneAxis) {
  ir::Graph g = import_text(R"(
<ir_version: 8, opset_import: ["" : 11]>
g (float[2, 3, 4] x) => (float[2, 3, 4] y)
{
  y = Softmax<axis = 1>(x)
}
)");
  // Softmax-11 normalises over the flattened (3*4) block: reshape to (2, 12),
  // softmax over the last axis, reshape back.
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[0].op_type, "Reshape");
  EXPECT_EQ(g.nodes[1].op_type, "Softmax");
  EXPECT_EQ(g.nodes[1].attr_int("axis", 0), -1);
  EXPECT_EQ(g.tensor(g.nodes[1].inputs[0]).shape, (ir::Shape{2, 12}));
  EXPECT_EQ(g.value(g.nodes[2].inputs[1])->to_i64(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(g.nodes[2].outputs[0], "y");
  EXPECT_EQ(g.tensor("y").shape, (ir::Shape{2, 3, 4}));

  ir::Graph last = import_text(R"(
<ir_version: 8, opset_import: ["" : 11]>
g (float[2, 3, 4] x) => (float[2, 3, 4] y)
{
  y = LogSoftmax<axis = 2>(x)
}
)");
  ASSERT_EQ(last.nodes.size(), 1u) << "the last axis means the same in every opset";
  EXPECT_EQ(last.nodes[0].attr_int("axis", 0), -1);
}

TEST(Importer, InvalidModelIsRejectedByTheChecker) {
  auto msg = error_of<ModelError>([] {
    import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x) => (float[3] y)
{
  y = Relu(x, x)
}
)");
  });
  EXPECT_NE(msg.find("not valid ONNX"), std::string::npos) << msg;
}

TEST(Importer, DanglingNamesAreReportedBeforeLibonnxSeesThem) {
  auto m = parse_model(R"(
<ir_version: 8, opset_import: ["" : 9]>
g (float[3] x) => (float[3] y)
{
  y = Relu(x)
}
)");
  m.mutable_graph()->mutable_node(0)->set_input(0, "ghost");
  auto msg = error_of<ModelError>([&] { import_proto(m); });
  EXPECT_NE(msg.find("Relu node 'Relu_0': input 'ghost' is neither"), std::string::npos) << msg;
  m.mutable_graph()->mutable_node(0)->set_input(0, "x");
  m.mutable_graph()->mutable_output(0)->set_name("z");
  msg = error_of<ModelError>([&] { import_proto(m); });
  EXPECT_NE(msg.find("graph output 'z' is not produced"), std::string::npos) << msg;
}

TEST(Importer, MissingFileIsNamed) {
  auto msg = error_of<ModelError>([] { importer::import_model("/nonexistent/dir/model.onnx"); });
  EXPECT_NE(msg.find("/nonexistent/dir/model.onnx"), std::string::npos) << msg;
}

TEST(Importer, TruncatedFileIsNotAValidModel) {
  test::ScratchDir dir("truncated");
  onnx::ModelProto m = parse_model(kAddRelu);
  std::string bytes = test::serialize(m);
  test::write_bytes(dir.file("model.onnx"), bytes.substr(0, bytes.size() / 2));
  auto path = dir.file("model.onnx");
  auto msg = error_of<ModelError>([&] { importer::import_model(path); });
  EXPECT_EQ(msg, path + ": not a valid ONNX model (protobuf parse failed)");
}

// Arbitrary bytes and mutated models must give an error or a graph, never a
// crash or a hang (the fuzz target does the same at scale).
TEST(Importer, MalformedBytesNeverCrash) {
  std::mt19937 rng(1234);
  const std::string valid = test::serialize(parse_model(kAddRelu));
  int errors = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes = valid;
    if (trial % 3 == 0) {
      bytes.resize(rng() % 64);
      for (auto& c : bytes) c = static_cast<char>(rng());
    } else {
      for (int k = 0; k < 1 + trial % 4; ++k)
        bytes[rng() % bytes.size()] = static_cast<char>(rng());
    }
    try {
      importer::import_model_bytes(bytes, ".");
    } catch (const ModelError&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 100) << "seed 1234";
}

}  // namespace
}  // namespace pipetrain

namespace pipetrain::test {
namespace {

TEST(Importer, IdentityChainsAreElidedSoWeightsReachTheirReaders) {
  ir::Graph g = import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 4] y, float[2, 4] z) <float[3, 4] w = {1,2,3,4,5,6,7,8,9,10,11,12}>
{
  w2 = Identity(w)
  w1 = Identity(w2)
  y = MatMul(x, w1)
  z = Identity(y)
}
)");
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].op_type, "MatMul");
  EXPECT_EQ(g.nodes[0].inputs[1], "w");
  EXPECT_FALSE(g.has_tensor("w1"));
  EXPECT_FALSE(g.has_tensor("w2"));
  EXPECT_EQ(g.nodes[1].op_type, "Identity") << "a graph output keeps its producer";
}

}  // namespace
}  // namespace pipetrain::test
