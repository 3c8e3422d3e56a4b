#include <gtest/gtest.h>

#include <cstring>

#include "executor/cpu/kernels/conv_impl.h"
#include "tests/executor/nn_test_util.h"

namespace pipetrain::test {
namespace {

using ir::Shape;
using ir::Tensor;

Tensor iota(Shape shape) {
  Tensor t(ir::DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

Tensor ones(Shape shape) {
  Tensor t(ir::DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 1.0f;
  return t;
}

// The examples of the ONNX operator documentation.
TEST(Conv, OnnxDocExampleWithPadding) {
  auto y = run_op("Conv", {in(iota({1, 1, 5, 5})), in(ones({1, 1, 3, 3}))},
                  {{"kernel_shape", std::vector<int64_t>{3, 3}},
                   {"pads", std::vector<int64_t>{1, 1, 1, 1}}})[0];
  expect_close(y, {12,  21, 27, 33,  24,  33,  54,  63, 72,  51,  63,  99, 108,
                   117, 81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84});
}

TEST(ConvTranspose, OnnxDocExample) {
  auto y = run_op("ConvTranspose", {in(iota({1, 1, 3, 3})), in(ones({1, 2, 3, 3}))})[0];
  std::vector<float> plane = {0,  1,  3, 3,  2,  3,  8,  15, 12, 7,  9,  21, 36,
                              27, 15, 9, 20, 33, 24, 13, 6,  13, 21, 15, 8};
  std::vector<float> want = plane;
  want.insert(want.end(), plane.begin(), plane.end());
  expect_close(y, want);
}

struct Case {
  bool transposed;
  Shape x, w;
  std::vector<int64_t> strides, pads, dilations;
  int64_t group;
  bool bias;
  std::vector<int64_t> output_padding;  // ConvTranspose only
};

std::map<std::string, ir::Attribute> attrs_of(const Case& c) {
  std::map<std::string, ir::Attribute> a = {
      {"strides", c.strides}, {"pads", c.pads}, {"dilations", c.dilations}, {"group", c.group}};
  if (c.transposed && !c.output_padding.empty()) a["output_padding"] = c.output_padding;
  return a;
}

// Direct definitions, spatial axes padded to 3: Conv gathers
// y[n, m, o] = b[m] + sum x[n, c, o*s + k*d - pb] w[m, c', k]; ConvTranspose
// scatters x[n, c, i] w[c, m', k] into y[n, m, i*s + k*d - pb].
Tensor naive(const Case& c, const Tensor& x, const Tensor& w, const Tensor* b, const Shape& ys) {
  size_t r = x.shape().size() - 2, lead = 3 - r;
  auto sp = [&](const Shape& s, size_t i) { return i < lead ? 1 : s[2 + i - lead]; };
  auto at = [&](const std::vector<int64_t>& v, size_t i, int64_t d) {
    return i < lead ? d : v[i - lead];
  };
  int64_t in[3], k[3], out[3], s[3], d[3], pb[3];
  for (size_t i = 0; i < 3; ++i) {
    in[i] = sp(x.shape(), i);
    k[i] = sp(w.shape(), i);
    out[i] = sp(ys, i);
    s[i] = at(c.strides, i, 1);
    d[i] = at(c.dilations, i, 1);
    pb[i] = at(c.pads, i, 0);
  }
  int64_t n_batch = x.shape()[0], cin = x.shape()[1], mout = ys[1];
  int64_t cg = cin / c.group, mg = mout / c.group, ksz = k[0] * k[1] * k[2];
  int64_t isz = in[0] * in[1] * in[2], osz = out[0] * out[1] * out[2];
  Tensor y(ir::DType::kF32, ys);
  float* yd = y.data<float>();
  const float* xd = x.data<float>();
  const float* wd = w.data<float>();
  for (int64_t n = 0; n < n_batch; ++n)
    for (int64_t ci = 0; ci < cin; ++ci)
      for (int64_t ml = 0; ml < mg; ++ml) {
        int64_t g = ci / cg, m = g * mg + ml;
        for (int64_t k0 = 0; k0 < k[0]; ++k0)
          for (int64_t k1 = 0; k1 < k[1]; ++k1)
            for (int64_t k2 = 0; k2 < k[2]; ++k2) {
              int64_t kk = (k0 * k[1] + k1) * k[2] + k2;
              float wv =
                  c.transposed ? wd[(ci * mg + ml) * ksz + kk] : wd[(m * cg + ci % cg) * ksz + kk];
              int64_t lim[3], kx[3] = {k0, k1, k2};
              for (int i = 0; i < 3; ++i) lim[i] = c.transposed ? in[i] : out[i];
              for (int64_t a0 = 0; a0 < lim[0]; ++a0)
                for (int64_t a1 = 0; a1 < lim[1]; ++a1)
                  for (int64_t a2 = 0; a2 < lim[2]; ++a2) {
                    int64_t a[3] = {a0, a1, a2}, p[3];
                    bool ok = true;
                    for (int i = 0; i < 3; ++i) {
                      p[i] = a[i] * s[i] + kx[i] * d[i] - pb[i];
                      ok = ok && p[i] >= 0 && p[i] < (c.transposed ? out[i] : in[i]);
                    }
                    if (!ok) continue;
                    int64_t ia = (a0 * lim[1] + a1) * lim[2] + a2;
                    int64_t ip = (p[0] * (c.transposed ? out[1] : in[1]) + p[1]) *
                                     (c.transposed ? out[2] : in[2]) +
                                 p[2];
                    if (c.transposed)
                      yd[(n * mout + m) * osz + ip] += xd[(n * cin + ci) * isz + ia] * wv;
                    else
                      yd[(n * mout + m) * osz + ia] += xd[(n * cin + ci) * isz + ip] * wv;
                  }
            }
      }
  if (b)
    for (int64_t n = 0; n < n_batch; ++n)
      for (int64_t m = 0; m < mout; ++m)
        for (int64_t o = 0; o < osz; ++o) yd[(n * mout + m) * osz + o] += b->data<float>()[m];
  return y;
}

// The arguments the kernel would build, for calling one implementation directly.
exec::cpu::ConvArgs conv_args(const Case& c, const Tensor& x, const Tensor& w, const Tensor* b,
                              Tensor& y) {
  ir::Node node;
  node.op_type = c.transposed ? "ConvTranspose" : "Conv";
  node.attrs = attrs_of(c);
  exec::cpu::ConvArgs a;
  a.transposed = c.transposed;
  a.group = c.group;
  a.x = c.x;
  a.w = c.w;
  a.y = y.shape();
  Shape in_sp(c.x.begin() + 2, c.x.end());
  std::vector<int64_t> kernel(c.w.begin() + 2, c.w.end());
  a.geo = c.transposed ? ir::transpose_geometry(node, in_sp, kernel)
                       : ir::window_geometry(node, in_sp, kernel, false);
  a.x_data = x.data<float>();
  a.w_data = w.data<float>();
  a.b_data = b ? b->data<float>() : nullptr;
  a.y_data = y.data<float>();
  return a;
}

const std::vector<Case> kCases = {
    // Conv: grouped + dilated + asymmetric pads, depthwise, 1-D, 3-D, 1x1, strided ResNet-like.
    {false, {2, 6, 11, 9}, {9, 2, 3, 3}, {2, 1}, {1, 0, 2, 1}, {2, 1}, 3, true, {}},
    {false, {2, 8, 10, 10}, {8, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 8, true, {}},
    {false, {3, 4, 17}, {5, 4, 4}, {3}, {2, 1}, {2}, 1, false, {}},
    {false,
     {1, 4, 6, 7, 5},
     {6, 2, 3, 2, 3},
     {1, 2, 1},
     {1, 1, 0, 0, 1, 2},
     {1, 1, 2},
     2,
     true,
     {}},
    {false, {2, 16, 7, 7}, {8, 16, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true, {}},
    {false, {2, 3, 20, 20}, {8, 3, 7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1, false, {}},
    // Conv with at most 8 output positions per image (conv_small_output.cc): ResNet's last
    // stage, its strided entry, 1-D.
    {false, {3, 8, 2, 2}, {6, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, {}},
    {false, {2, 5, 4, 4}, {7, 5, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, false, {}},
    {false, {2, 3, 7}, {4, 3, 3}, {2}, {1, 0}, {1}, 1, true, {}},
    // ConvTranspose: grouped + dilated + output_padding, 1-D, 3-D, ResNet-like upsampling.
    {true, {2, 4, 5, 4}, {4, 3, 3, 2}, {2, 3}, {1, 0, 0, 1}, {2, 1}, 2, true, {1, 2}},
    {true, {1, 3, 6}, {3, 2, 4}, {3}, {2, 1}, {1}, 1, false, {1}},
    {true,
     {1, 4, 3, 4, 2},
     {4, 1, 2, 3, 2},
     {1, 2, 2},
     {0, 1, 0, 1, 0, 0},
     {1, 1, 2},
     2,
     true,
     {0, 1, 1}},
    {true, {2, 8, 7, 7}, {8, 4, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, true, {1, 1}},
};

TEST(Conv, OneDnnAndPlainPathsMatchTheDefinition) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(std::string(c.transposed ? "ConvTranspose" : "Conv") + " x " + ir::shape_str(c.x) +
                 " w " + ir::shape_str(c.w));
    Tensor x = wave(c.x, 0.3), w = wave(c.w, 1.1, 0.5);
    int64_t out_channels = c.transposed ? c.w[1] * c.group : c.w[0];
    Tensor b = wave({out_channels}, 2.0);
    std::vector<OpInput> ins = {in(x), in(w)};
    if (c.bias) ins.push_back(in(b));
    const char* op = c.transposed ? "ConvTranspose" : "Conv";
    Tensor y = run_op(op, ins, attrs_of(c))[0];
    Tensor want = naive(c, x, w, c.bias ? &b : nullptr, y.shape());
    expect_close(y, want);

    for (bool use_dnnl : {true, false}) {
      Tensor direct(ir::DType::kF32, y.shape());
      exec::cpu::ConvArgs a = conv_args(c, x, w, c.bias ? &b : nullptr, direct);
      if (use_dnnl)
        EXPECT_TRUE(exec::cpu::conv_dnnl(a));  // every case here is expressible in oneDNN
      else
        exec::cpu::conv_plain(a);
      expect_close(direct, want);
    }
    Tensor direct(ir::DType::kF32, y.shape());
    exec::cpu::ConvArgs a = conv_args(c, x, w, c.bias ? &b : nullptr, direct);
    const int64_t positions = y.numel() / (y.shape()[0] * y.shape()[1]);
    const bool small = !c.transposed && c.group == 1 && positions <= 8;
    ASSERT_EQ(exec::cpu::conv_small_output(a), small);
    if (small) expect_close(direct, want);
  }
}

// A Conv carrying the fused ReLU (activation "Relu") on the batched-GEMM path
// clamps its output there too.
TEST(Conv, SmallOutputAppliesTheFusedRelu) {
  const Case c{false, {3, 8, 2, 2}, {6, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, {}};
  Tensor x = wave(c.x, 0.3), w = wave(c.w, 1.1, 0.5), b = wave({6}, 2.0);
  auto attrs = attrs_of(c);
  attrs["activation"] = std::string("Relu");
  Tensor y = run_op("Conv", {in(x), in(w), in(b)}, attrs)[0];
  Tensor want = naive(c, x, w, &b, y.shape());
  int negatives = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    negatives += want.data<float>()[i] < 0;
    want.data<float>()[i] = std::max(want.data<float>()[i], 0.0f);
  }
  EXPECT_GT(negatives, 0);  // the clamp has something to do
  expect_close(y, want);
}

// Reordered weights of a graph value are cached per (buffer, values_version):
// the same version reuses them even if the bytes changed (the contract: whoever
// changes values bumps the version), a new version or a non-value reorders anew.
// Version 0 (RunOptions' default) caches nothing: one process that runs model
// after model reuses freed weight buffers (reference_check runs 26 models at
// version 0; a stale hit is the likely cause of one CI run's GoogLeNet mismatch).
TEST(Conv, WeightCacheFollowsValuesVersion) {
  const Case c = {false, {2, 16, 7, 7}, {8, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, {}};
  Tensor x = wave(c.x, 0.3), w = wave(c.w, 1.1, 0.5), b = wave({8}, 2.0);
  Tensor w2 = wave(c.w, 0.7, 0.1);
  const Tensor want1 = naive(c, x, w, &b, {2, 8, 7, 7});
  const Tensor want2 = naive(c, x, w2, &b, {2, 8, 7, 7});
  auto run = [&](bool is_value, uint64_t version) {
    Tensor y(ir::DType::kF32, {2, 8, 7, 7});
    exec::cpu::ConvArgs a = conv_args(c, x, w, &b, y);
    a.w_is_value = is_value;
    a.values_version = version;
    EXPECT_TRUE(exec::cpu::conv_dnnl(a));
    return y;
  };
  const uint64_t v = 0x5eed0001;  // a version no other test uses
  expect_close(run(true, v), want1);
  std::memcpy(w.raw(), w2.raw(), w.nbytes());  // changed in place, version not bumped
  expect_close(run(true, v), want1);
  expect_close(run(false, v), want2);
  expect_close(run(true, v + 1), want2);
  const Tensor w1 = wave(c.w, 1.1, 0.5);
  std::memcpy(w.raw(), w1.raw(), w.nbytes());
  expect_close(run(true, 0), want1);
  std::memcpy(w.raw(), w2.raw(), w.nbytes());
  expect_close(run(true, 0), want2);
}

TEST(Conv, AutoPadShapes) {
  Tensor x = wave({1, 2, 7, 6}), w = wave({3, 2, 3, 3});
  auto same = [&](const char* mode) {
    return run_op("Conv", {in(x), in(w)},
                  {{"auto_pad", std::string(mode)}, {"strides", std::vector<int64_t>{2, 2}}})[0];
  };
  EXPECT_EQ(same("SAME_UPPER").shape(), (Shape{1, 3, 4, 3}));
  EXPECT_EQ(same("VALID").shape(), (Shape{1, 3, 3, 2}));
  // 7 rows, stride 2, kernel 3: total pad 2 on rows (1 + 1); 6 columns: total 1, where
  // SAME_UPPER pads the end and SAME_LOWER the beginning: equal to explicit pads.
  Case upper{false, {1, 2, 7, 6}, {3, 2, 3, 3}, {2, 2}, {1, 0, 1, 1}, {1, 1}, 1, false, {}};
  Case lower{false, {1, 2, 7, 6}, {3, 2, 3, 3}, {2, 2}, {1, 1, 1, 0}, {1, 1}, 1, false, {}};
  expect_close(same("SAME_UPPER"), run_op("Conv", {in(x), in(w)}, attrs_of(upper))[0]);
  expect_close(same("SAME_LOWER"), run_op("Conv", {in(x), in(w)}, attrs_of(lower))[0]);
}

TEST(ConvTranspose, OutputShapeBeyondTheFullOutput) {
  // The full output is 9x7; output_shape 12x10 gives total padding -3 per axis,
  // split (ONNX, NOTSET) as pads_begin -1, pads_end -2: the output grows by one
  // row/column before and two after, which only B reaches. oneDNN takes a
  // negative end padding but not a negative begin, so this runs the plain path.
  Tensor x = wave({1, 1, 3, 3}), w = wave({1, 2, 3, 3}, 0.5), b = wave({2}, 1.0);
  std::map<std::string, ir::Attribute> attrs = {{"strides", std::vector<int64_t>{3, 2}},
                                                {"output_shape", std::vector<int64_t>{12, 10}}};
  auto y = run_op("ConvTranspose", {in(x), in(w), in(b)}, attrs)[0];
  ASSERT_EQ(y.shape(), (Shape{1, 2, 12, 10}));
  Case c{true, {1, 1, 3, 3}, {1, 2, 3, 3}, {3, 2}, {-1, -1, -2, -2}, {1, 1}, 1, true, {}};
  expect_close(y, naive(c, x, w, &b, y.shape()));
  EXPECT_FLOAT_EQ(y.data<float>()[0], b.data<float>()[0]);    // channel 0, row 0
  EXPECT_FLOAT_EQ(y.data<float>()[239], b.data<float>()[1]);  // channel 1, row 11, column 9

  ir::Node node;
  node.attrs = attrs;
  ir::WindowGeometry g = ir::transpose_geometry(node, {3, 3}, {3, 3});
  EXPECT_EQ(g.pads_begin, (std::vector<int64_t>{-1, -1}));
  EXPECT_EQ(g.pads_end, (std::vector<int64_t>{-2, -2}));
  Case valid = c;
  valid.pads = {0, 0, 0, 0};
  Tensor unused(ir::DType::kF32, y.shape());
  exec::cpu::ConvArgs a = conv_args(valid, x, w, &b, unused);
  a.geo = g;
  EXPECT_FALSE(exec::cpu::conv_dnnl(a));
}

TEST(Conv, InvalidModelsAreRefused) {
  Tensor x = wave({1, 4, 5, 5});
  // W expects 3 input channels per group.
  EXPECT_THROW(run_op("Conv", {in(x), in(wave({2, 3, 3, 3}))}), ModelError);
  // 4 channels do not split into 3 groups.
  EXPECT_THROW(run_op("Conv", {in(x), in(wave({3, 1, 3, 3}))}, {{"group", int64_t{3}}}),
               ModelError);
  EXPECT_THROW(run_op("Conv", {in(x), in(wave({2, 4, 3, 3}))}, {{"auto_pad", std::string("X")}}),
               UnsupportedOp);
  EXPECT_THROW(run_op("Conv", {in(wave({1, 1, 2, 2, 2, 2})), in(wave({1, 1, 1, 1, 1, 1}))}),
               UnsupportedOp);
  try {
    run_op("Conv", {in(x), in(wave({2, 4, 7, 7}))});
    FAIL() << "expected ModelError";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("too small"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pipetrain::test
