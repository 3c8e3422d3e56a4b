// Narrow integer types (importer/narrow_ints.cc, tensor_proto.cc): int8-int16
// and uint8-uint16 are computed in i32, uint32-uint64 in i64. What ONNX's node
// tests do not reach: a Cast that overflows wraps as the narrow type would,
// tensors keep their sign through the widening and go back in their width,
// and quantisation saturates to the zero point's own type.
#include <gtest/gtest.h>

#include <cstring>

#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "importer/internal.h"
#include "tests/importer/model_util.h"

namespace pipetrain {
namespace {

std::vector<int64_t> run_ints(const ir::Graph& g, const std::vector<float>& x) {
  auto backend = exec::make_cpu_backend();
  auto outs = exec::ForwardRunner(g, *backend)
                  .run({{"x", ir::Tensor::from_f32(x, {static_cast<int64_t>(x.size())})}});
  const ir::Tensor& y = outs.at("y");
  std::vector<int64_t> v;
  for (int64_t i = 0; i < y.numel(); ++i) v.push_back(static_cast<int64_t>(y.at(i)));
  return v;
}

int32_t onnx_type(const std::string& upper) {
  onnx::TensorProto::DataType t = onnx::TensorProto::UNDEFINED;
  EXPECT_TRUE(onnx::TensorProto::DataType_Parse(upper, &t)) << upper;
  return t;
}

ir::Graph cast_to(const std::string& text_type, const std::string& upper) {
  return test::import_text(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[6] x) => ()" + text_type +
                           R"([6] y) { y = Cast<to = )" + std::to_string(onnx_type(upper)) +
                           R"(>(x) })");
}

TEST(NarrowInts, CastWrapsLikeTheNarrowType) {
  const std::vector<float> x = {300.f, -1.f, 255.f, 7.f, -129.f, 65537.f};
  ir::Graph u8 = cast_to("uint8", "UINT8");
  EXPECT_EQ(u8.tensor("y").dtype, ir::DType::kI32);
  EXPECT_EQ(run_ints(u8, x), (std::vector<int64_t>{44, 255, 255, 7, 127, 1}));
  EXPECT_EQ(run_ints(cast_to("int8", "INT8"), x), (std::vector<int64_t>{44, -1, -1, 7, 127, 1}));
  EXPECT_EQ(run_ints(cast_to("uint16", "UINT16"), x),
            (std::vector<int64_t>{300, 65535, 255, 7, 65407, 1}));
  EXPECT_EQ(run_ints(cast_to("int16", "INT16"), x),
            (std::vector<int64_t>{300, -1, 255, 7, -129, 1}));
  ir::Graph u32 = cast_to("uint32", "UINT32");
  EXPECT_EQ(u32.tensor("y").dtype, ir::DType::kI64);
  EXPECT_EQ(run_ints(u32, x), (std::vector<int64_t>{300, 4294967295, 255, 7, 4294967167, 65537}));
}

TEST(NarrowInts, TensorsKeepTheirSignAndGoBackInTheirWidth) {
  onnx::TensorProto p;
  p.set_data_type(onnx::TensorProto::INT8);
  p.add_dims(3);
  p.set_raw_data(std::string("\xff\x80\x7f", 3));
  ir::Tensor t = importer::detail::tensor_from_proto(p, ".", "int8 tensor");
  ASSERT_EQ(t.dtype(), ir::DType::kI32);
  EXPECT_EQ(t.data<int32_t>()[0], -1);
  EXPECT_EQ(t.data<int32_t>()[1], -128);
  EXPECT_EQ(t.data<int32_t>()[2], 127);

  onnx::TensorProto u;  // typed field: uint64_data
  u.set_data_type(onnx::TensorProto::UINT32);
  u.add_dims(2);
  u.add_uint64_data(4294967295u);
  u.add_uint64_data(3);
  ir::Tensor w = importer::detail::tensor_from_proto(u, ".", "uint32 tensor");
  ASSERT_EQ(w.dtype(), ir::DType::kI64);
  EXPECT_EQ(w.data<int64_t>()[0], 4294967295);

  onnx::TensorProto back;
  importer::detail::tensor_to_proto(t, "t", &back, onnx::TensorProto::INT8);
  EXPECT_EQ(back.data_type(), onnx::TensorProto::INT8);
  EXPECT_EQ(back.raw_data(), std::string("\xff\x80\x7f", 3));
  importer::detail::tensor_to_proto(w, "w", &back, onnx::TensorProto::UINT32);
  EXPECT_EQ(back.raw_data(), std::string("\xff\xff\xff\xff\x03\x00\x00\x00", 8));
}

// The same scaled values saturate to [0, 255] with a uint8 zero point and to
// [-128, 127] with an int8 one, which the IR's i32 alone could not tell apart.
TEST(NarrowInts, QuantizeLinearSaturatesToItsZeroPointsType) {
  const std::vector<float> x = {-300.f, -2.5f, 0.5f, 1.5f, 127.6f, 400.f};
  for (const char* zp_type : {"uint8", "int8"}) {
    ir::Graph g = test::import_text(std::string(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[6] x) => ()") + zp_type + R"([6] y)
<float s = {1.0}, )" + zp_type + R"( z = {0}>
{ y = QuantizeLinear(x, s, z) })");
    const bool u8 = std::string(zp_type) == "uint8";
    // Round half to even: -2.5 -> -2, 0.5 -> 0, 1.5 -> 2.
    EXPECT_EQ(run_ints(g, x), u8 ? (std::vector<int64_t>{0, 0, 0, 2, 128, 255})
                                 : (std::vector<int64_t>{-128, -2, 0, 2, 127, 127}))
        << zp_type;
  }
}

}  // namespace
}  // namespace pipetrain
