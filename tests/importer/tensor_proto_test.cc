// TensorProto decoding: raw_data, typed fields, external data, size checks.
#include <gtest/gtest.h>

#include <cstring>

#include "importer/internal.h"
#include "ir/error.h"
#include "tests/importer/model_util.h"

namespace pipetrain {
namespace {

using importer::detail::tensor_from_proto;
using test::error_of;

onnx::TensorProto proto_f32(std::vector<int64_t> dims) {
  onnx::TensorProto p;
  p.set_name("t");
  p.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) p.add_dims(d);
  return p;
}

TEST(TensorProto, RawDataF32) {
  auto p = proto_f32({2});
  float v[2] = {1.5f, -2.0f};
  p.set_raw_data(std::string(reinterpret_cast<const char*>(v), sizeof v));
  ir::Tensor t = tensor_from_proto(p, ".", "t");
  EXPECT_EQ(t.dtype(), ir::DType::kF32);
  EXPECT_EQ(t.shape(), (ir::Shape{2}));
  EXPECT_EQ(t.data<float>()[1], -2.0f);
}

TEST(TensorProto, TypedFields) {
  auto p = proto_f32({3});
  for (float f : {1.0f, 2.0f, 3.0f}) p.add_float_data(f);
  EXPECT_EQ(tensor_from_proto(p, ".", "t").data<float>()[2], 3.0f);

  onnx::TensorProto i;
  i.set_data_type(onnx::TensorProto::INT64);
  i.add_int64_data(-7);  // a scalar: no dims
  ir::Tensor ti = tensor_from_proto(i, ".", "i");
  EXPECT_EQ(ti.shape(), ir::Shape{});
  EXPECT_EQ(ti.data<int64_t>()[0], -7);

  onnx::TensorProto h;
  h.set_data_type(onnx::TensorProto::FLOAT16);
  h.add_dims(2);
  h.add_int32_data(0x3C00);  // 1.0
  h.add_int32_data(0xC000);  // -2.0
  ir::Tensor th = tensor_from_proto(h, ".", "h");
  EXPECT_EQ(th.dtype(), ir::DType::kF16);
  EXPECT_EQ(th.at(0), 1.0);
  EXPECT_EQ(th.at(1), -2.0);

  onnx::TensorProto b;
  b.set_data_type(onnx::TensorProto::BOOL);
  b.add_dims(2);
  b.set_raw_data(std::string("\x00\x07", 2));
  ir::Tensor tb = tensor_from_proto(b, ".", "b");
  EXPECT_EQ(tb.data<uint8_t>()[1], 1) << "bools are normalised to 0/1";
}

TEST(TensorProto, SizeMismatchesAreErrors) {
  auto p = proto_f32({2, 2});
  p.set_raw_data(std::string(12, '\0'));
  auto msg = error_of<ModelError>([&] { tensor_from_proto(p, ".", "initializer 'w'"); });
  EXPECT_NE(msg.find("initializer 'w' has 12 bytes of raw_data"), std::string::npos) << msg;

  auto q = proto_f32({3});
  q.add_float_data(1.0f);
  msg = error_of<ModelError>([&] { tensor_from_proto(q, ".", "q"); });
  EXPECT_NE(msg.find("1 values in float_data"), std::string::npos) << msg;

  auto neg = proto_f32({2, -1});
  msg = error_of<ModelError>([&] { tensor_from_proto(neg, ".", "n"); });
  EXPECT_NE(msg.find("negative dimension -1"), std::string::npos) << msg;
}

TEST(TensorProto, HugeDimsAreRefusedBeforeAllocating) {
  auto p = proto_f32({int64_t{1} << 40, int64_t{1} << 40});
  auto msg = error_of<ModelError>([&] { tensor_from_proto(p, ".", "big"); });
  EXPECT_NE(msg.find("too large"), std::string::npos) << msg;
  // Within the 16 GiB limit but with no data: refused by the size check, not by malloc.
  auto q = proto_f32({int64_t{1} << 32});
  msg = error_of<ModelError>([&] { tensor_from_proto(q, ".", "q"); });
  EXPECT_NE(msg.find("values in float_data"), std::string::npos) << msg;
}

TEST(TensorProto, UnsupportedDtypeIsNamed) {
  onnx::TensorProto d;
  d.set_data_type(onnx::TensorProto::COMPLEX64);
  d.add_float_data(1);
  d.add_float_data(0);
  auto msg = error_of<UnsupportedOp>([&] { tensor_from_proto(d, ".", "tensor 'd'"); });
  EXPECT_NE(msg.find("tensor 'd' has dtype complex64"), std::string::npos) << msg;
  d.set_data_type(onnx::TensorProto::STRING);
  msg = error_of<UnsupportedOp>([&] { tensor_from_proto(d, ".", "u"); });
  EXPECT_NE(msg.find("string"), std::string::npos) << msg;
}

// float64 is read as float32 from double_data and raw_data, and written back as float64.
TEST(TensorProto, Float64RoundsToFloat32AndWidensBack) {
  onnx::TensorProto d;
  d.set_data_type(onnx::TensorProto::DOUBLE);
  d.add_dims(2);
  d.add_double_data(0.1);
  d.add_double_data(-3.0);
  ir::Tensor t = tensor_from_proto(d, ".", "d");
  EXPECT_EQ(t.dtype(), ir::DType::kF32);
  EXPECT_EQ(t.data<float>()[0], 0.1f);
  EXPECT_EQ(t.data<float>()[1], -3.0f);
  onnx::TensorProto back;
  importer::detail::tensor_to_proto(t, "d", &back, onnx::TensorProto::DOUBLE);
  EXPECT_EQ(back.data_type(), onnx::TensorProto::DOUBLE);
  ir::Tensor again = tensor_from_proto(back, ".", "back");  // raw_data this time
  EXPECT_EQ(again.data<float>()[0], 0.1f);
  EXPECT_EQ(again.data<float>()[1], -3.0f);
  d.add_double_data(1.0);  // 3 values for 2 elements
  auto msg = error_of<ModelError>([&] { tensor_from_proto(d, ".", "d"); });
  EXPECT_NE(msg.find("double_data"), std::string::npos) << msg;
}

TEST(TensorProto, LoadsTestDataFilesWithTheirName) {
  test::ScratchDir dir("tensor_pb");
  auto p = proto_f32({2});
  p.set_name("input_x");
  p.add_float_data(4.0f);
  p.add_float_data(5.0f);
  std::string bytes;
  p.SerializeToString(&bytes);
  test::write_bytes(dir.file("input_0.pb"), bytes);
  std::string name;
  ir::Tensor t = importer::load_tensor_proto(dir.file("input_0.pb"), &name);
  EXPECT_EQ(name, "input_x");
  EXPECT_EQ(t.data<float>()[1], 5.0f);

  test::write_bytes(dir.file("bad.pb"), std::string("\x0a\xff\xff", 3));
  auto msg = error_of<ModelError>([&] { importer::load_tensor_proto(dir.file("bad.pb")); });
  EXPECT_NE(msg.find("bad.pb: not a valid TensorProto"), std::string::npos) << msg;
}

onnx::TensorProto external(const std::string& location, int64_t offset, int64_t length) {
  auto p = proto_f32({2});
  p.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = p.add_external_data();
  kv->set_key("location");
  kv->set_value(location);
  kv = p.add_external_data();
  kv->set_key("offset");
  kv->set_value(std::to_string(offset));
  if (length >= 0) {
    kv = p.add_external_data();
    kv->set_key("length");
    kv->set_value(std::to_string(length));
  }
  return p;
}

TEST(TensorProto, ExternalData) {
  test::ScratchDir dir("external");
  float v[3] = {0.0f, 7.0f, 8.0f};
  test::write_bytes(dir.file("w.bin"), std::string(reinterpret_cast<const char*>(v), sizeof v));
  const std::string base = dir.path().string();
  ir::Tensor t = tensor_from_proto(external("w.bin", 4, 8), base, "w");
  EXPECT_EQ(t.data<float>()[0], 7.0f);
  EXPECT_EQ(t.data<float>()[1], 8.0f);

  auto msg = error_of<ModelError>([&] { tensor_from_proto(external("w.bin", 8, -1), base, "w"); });
  EXPECT_NE(msg.find("too short"), std::string::npos) << msg;
  msg = error_of<ModelError>([&] { tensor_from_proto(external("w.bin", 0, 12), base, "w"); });
  EXPECT_NE(msg.find("length 12"), std::string::npos) << msg;
  msg = error_of<ModelError>([&] { tensor_from_proto(external("../w.bin", 0, -1), base, "w"); });
  EXPECT_NE(msg.find("escapes the model directory"), std::string::npos) << msg;
  msg = error_of<ModelError>([&] { tensor_from_proto(external("/etc/passwd", 0, -1), base, "w"); });
  EXPECT_NE(msg.find("absolute path"), std::string::npos) << msg;
  msg = error_of<ModelError>([&] { tensor_from_proto(external("none.bin", 0, -1), base, "w"); });
  EXPECT_NE(msg.find("not found"), std::string::npos) << msg;
}

TEST(TensorProto, EncodeDecodeIsBitwise) {
  ir::Tensor t(ir::DType::kBF16, {3});
  t.data<uint16_t>()[0] = 0x3f80;
  t.data<uint16_t>()[1] = 0x7fc1;  // a NaN payload survives
  t.data<uint16_t>()[2] = 0x8000;
  onnx::TensorProto p;
  importer::detail::tensor_to_proto(t, "b", &p);
  EXPECT_EQ(p.name(), "b");
  ir::Tensor back = tensor_from_proto(p, ".", "b");
  EXPECT_EQ(back.dtype(), ir::DType::kBF16);
  EXPECT_EQ(std::memcmp(back.raw(), t.raw(), t.nbytes()), 0);
}

}  // namespace
}  // namespace pipetrain
