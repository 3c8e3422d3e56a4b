// Export and re-import: a valid ONNX file (libonnx's checker agrees), and
// the same graph back, bit for bit. Also models with external data.
#include <onnx/checker.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "importer/importer.h"
#include "ir/error.h"
#include "tests/importer/model_util.h"

namespace pipetrain {
namespace {

bool same_attr(const ir::Attribute& a, const ir::Attribute& b) {
  if (ir::attr_type(a) != ir::attr_type(b)) return false;
  switch (ir::attr_type(a)) {
    case ir::AttrType::kInt: return std::get<int64_t>(a) == std::get<int64_t>(b);
    case ir::AttrType::kFloat: return std::get<float>(a) == std::get<float>(b);
    case ir::AttrType::kString: return std::get<std::string>(a) == std::get<std::string>(b);
    case ir::AttrType::kInts:
      return std::get<std::vector<int64_t>>(a) == std::get<std::vector<int64_t>>(b);
    case ir::AttrType::kFloats:
      return std::get<std::vector<float>>(a) == std::get<std::vector<float>>(b);
    case ir::AttrType::kStrings:
      return std::get<std::vector<std::string>>(a) == std::get<std::vector<std::string>>(b);
    case ir::AttrType::kTensor: break;
  }
  const auto& ta = std::get<ir::Tensor>(a);
  const auto& tb = std::get<ir::Tensor>(b);
  return ta.dtype() == tb.dtype() && ta.shape() == tb.shape() &&
         std::memcmp(ta.raw(), tb.raw(), ta.nbytes()) == 0;
}

void expect_same_graph(const ir::Graph& a, const ir::Graph& b) {
  EXPECT_EQ(a.opset, b.opset);
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.outputs, b.outputs);
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const ir::Node& x = a.nodes[i];
    const ir::Node& y = b.nodes[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.op_type, y.op_type) << x.name;
    EXPECT_EQ(x.inputs, y.inputs) << x.name;
    EXPECT_EQ(x.outputs, y.outputs) << x.name;
    ASSERT_EQ(x.attrs.size(), y.attrs.size()) << x.name;
    for (const auto& [key, value] : x.attrs) {
      ASSERT_TRUE(y.has_attr(key)) << x.name << " " << key;
      EXPECT_TRUE(same_attr(value, y.attrs.at(key))) << x.name << " " << key;
    }
  }
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (const auto& [name, d] : a.tensors()) {
    ASSERT_TRUE(b.has_tensor(name)) << name;
    const ir::TensorDesc& e = b.tensor(name);
    EXPECT_EQ(d.dtype, e.dtype) << name;
    EXPECT_EQ(d.shape, e.shape) << name;
    EXPECT_EQ(d.role, e.role) << name;
  }
  ASSERT_EQ(a.values().size(), b.values().size());
  for (const auto& [name, v] : a.values()) {
    const ir::Tensor* w = b.value(name);
    ASSERT_NE(w, nullptr) << name;
    ASSERT_EQ(v.nbytes(), w->nbytes()) << name;
    EXPECT_EQ(std::memcmp(v.raw(), w->raw(), v.nbytes()), 0) << name;
  }
}

// Every attribute kind the IR has, params, buffers, int and float constants.
constexpr const char* kNet = R"(
<ir_version: 8, opset_import: ["" : 17]>
net (float[N, 2, 4, 4] x) => (float[N, 14] y)
  <float[3, 2, 3, 3] conv_w = {1.0, -2.0, 3.0, 0.5, 0.25, 0.125, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0,
                               1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0,
                               1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0,
                               1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0,
                               1.0, 1.0, 1.0, 1.0, 1.0, 1.0},
   float[3] scale = {1.0, 2.0, 3.0}, float[3] bias = {0.0, 0.1, 0.2},
   float[3] mean = {0.0, 0.0, 1.0}, float[3] var = {1.0, 1.0, 4.0},
   int64[2] flat = {0, -1}, int64[4] pads = {0, 0, 0, 2}>
{
  c = Conv<kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2], auto_pad = "NOTSET">(x, conv_w)
  b = BatchNormalization<epsilon = 0.001>(c, scale, bias, mean, var)
  r = Relu(b)
  k = Constant<value = float[1] {0.5}>()
  h = Mul(r, k)
  f = Reshape(h, flat)
  p = Pad<mode = "constant">(f, pads)
  y = Softmax<axis = -1>(p)
}
)";

TEST(RoundTrip, ExportIsValidOnnxAndReimportsIdentically) {
  test::ScratchDir dir("roundtrip");
  auto m = test::parse_model(kNet);
  test::name_nodes(m, {"/features/conv/Conv", "/features/bn/BatchNormalization", "/features/Relu",
                       "/Constant", "/Mul", "/Reshape", "/Pad", "/Softmax"});
  importer::ImportOptions o;
  o.batch = 2;
  o.layer_depth = 1;
  ir::Graph g = test::import_proto(m, o);
  ASSERT_EQ(g.tensor("mean").role, ir::Role::kBuffer);
  ASSERT_EQ(g.tensor("k").role, ir::Role::kConstant);
  ASSERT_EQ(g.tensor("y").shape, (ir::Shape{2, 14}));

  const std::string path = dir.file("out.onnx");
  importer::export_model(g, path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_NO_THROW(onnx::checker::check_model(path));

  ir::Graph back = importer::import_model(path, o);
  expect_same_graph(g, back);
  EXPECT_EQ(back.layers.size(), g.layers.size());
}

TEST(RoundTrip, ExportToAMissingDirectoryFailsCleanly) {
  ir::Graph g = test::import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y)
{
  y = Relu(x)
}
)");
  EXPECT_THROW(importer::export_model(g, "/nonexistent/dir/out.onnx"), Error);
}

// A model whose weight lives in a separate file (TensorProto data_location
// EXTERNAL), written by hand the way onnx.save(..., save_as_external_data) does.
TEST(RoundTrip, ExternalDataIsReadRelativeToTheModel) {
  test::ScratchDir dir("external_model");
  auto m = test::parse_model(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] y) <float[3] w = {0.0, 0.0, 0.0}>
{
  y = Add(x, w)
}
)");
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add_kv = [&](const char* key, const std::string& value) {
    auto* kv = w->add_external_data();
    kv->set_key(key);
    kv->set_value(value);
  };
  add_kv("location", "weights/w.bin");
  add_kv("offset", "16");
  add_kv("length", "12");
  std::filesystem::create_directories(dir.path() / "weights");
  std::string blob(16, '\x55');
  const float values[3] = {1.5f, -2.5f, 1e-3f};
  blob.append(reinterpret_cast<const char*>(values), sizeof values);
  test::write_bytes(dir.file("weights/w.bin"), blob);
  test::write_bytes(dir.file("model.onnx"), test::serialize(m));

  ir::Graph g = importer::import_model(dir.file("model.onnx"));
  const ir::Tensor* t = g.value("w");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(std::memcmp(t->raw(), values, sizeof values), 0);

  // The re-exported model carries the weight inline and reads back the same.
  importer::export_model(g, dir.file("inline.onnx"));
  expect_same_graph(g, importer::import_model(dir.file("inline.onnx")));

  // A location leaving the model directory is refused.
  w->mutable_external_data(0)->set_value("../w.bin");
  test::write_bytes(dir.file("evil.onnx"), test::serialize(m));
  auto msg = test::error_of<ModelError>([&] { importer::import_model(dir.file("evil.onnx")); });
  EXPECT_NE(msg.find("escapes the model directory"), std::string::npos) << msg;
}

}  // namespace
}  // namespace pipetrain
