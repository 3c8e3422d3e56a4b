// ConvGrad and ConvTransposeGrad. Both forwards are linear in X and in W, so
// each column of their Jacobians is one forward run on a unit input, and
// dX[e] = <dY, conv(unit_e, W)>, dW[j] = <dY, conv(X, unit_j)> hold exactly
// (the unit runs produce single products, summed here in double). That checks
// the kernel, both of its paths, against the forward kernel, which the ONNX
// conformance data pins down; two cases also carry PyTorch autograd values.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/cpu/kernels/conv_impl.h"
#include "tests/executor/nn_test_util.h"

namespace pipetrain::test {
namespace {

// One thread: these many tiny oneDNN calls would otherwise each pay OpenMP
// barriers, which cost milliseconds on a 2-core machine shared with builds.
// ThreadCountDoesNotMatter runs one case on more.
class OneThread : public ::testing::Environment {
 public:
  void SetUp() override { exec::set_cpu_threads(1); }
};
const auto* const kOneThread = ::testing::AddGlobalTestEnvironment(new OneThread);

using ir::Shape;
using ir::Tensor;
using Attrs = std::map<std::string, ir::Attribute>;
using Ints = std::vector<int64_t>;

struct Case {
  const char* op;  // "Conv" or "ConvTranspose"
  Shape x, w;
  Attrs attrs;
};

bool transposed(const Case& c) {
  return std::string(c.op) == "ConvTranspose";
}

Tensor zeros(const Shape& s) {
  return Tensor(ir::DType::kF32, s);  // zero-filled
}

// sum_i a[a_off + i] * b[b_off + i] over n elements, in double.
double dot(const Tensor& a, int64_t a_off, const Tensor& b, int64_t b_off, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i)
    s += static_cast<double>(a.data<float>()[a_off + i]) * b.data<float>()[b_off + i];
  return s;
}

struct Grads {
  Tensor dx, dw, db;
};

// The gradients from forward runs on unit inputs (see the file comment),
// batched so that three runs do: the unit X's as the samples of one batch,
// the unit W's as the output channels of one wider op.
Grads reference(const Case& c, const Tensor& x, const Tensor& w, const Tensor& dy) {
  Grads r{zeros(x.shape()), zeros(w.shape()), zeros({dy.shape()[1]})};
  const int64_t n_batch = x.shape()[0], m_out = dy.shape()[1];
  const int64_t per_x = x.numel() / n_batch, per_y = dy.numel() / n_batch;
  const int64_t o_size = per_y / m_out;
  // dX: sample e of the batch is the e-th unit vector of (C, D...).
  Shape ub = x.shape();
  ub[0] = per_x;
  Tensor units = zeros(ub);
  for (int64_t e = 0; e < per_x; ++e) units.data<float>()[e * per_x + e] = 1.0f;
  Tensor yu = run_op(c.op, {in(units), in(w)}, c.attrs)[0];  // (per_x, M, O...)
  for (int64_t n = 0; n < n_batch; ++n)
    for (int64_t e = 0; e < per_x; ++e)
      r.dx.data<float>()[n * per_x + e] =
          static_cast<float>(dot(dy, n * per_y, yu, e * per_y, per_y));
  // dW: output channel j of the wide op is the forward with the j-th unit W,
  // restricted to its one non-zero channel m(j). Conv, W (M, C/G, K): j =
  // (m, c', k) in row-major order runs through the groups in blocks, so
  // W' (J, C/G, K) with the same groups does. ConvTranspose, W (C, M/G, K):
  // j = (c, m', k) reads X channel c only, so one group per channel and W'
  // (C, M/G * K, K) with W'[c, (m', k), k'] = (k == k').
  const int64_t j_count = w.numel(),
                k_size = ir::numel(Shape(w.shape().begin() + 2, w.shape().end()));
  const int64_t group = c.attrs.count("group") ? std::get<int64_t>(c.attrs.at("group")) : 1;
  Shape wide_shape = w.shape();
  Attrs wide_attrs = c.attrs;
  if (transposed(c)) {
    wide_shape[1] = w.shape()[1] * k_size;
    wide_attrs["group"] = w.shape()[0];
  } else {
    wide_shape[0] = j_count;
  }
  Tensor wide = zeros(wide_shape);
  for (int64_t j = 0; j < j_count; ++j) {
    // Row j of W' holds the unit: at (c', k) for Conv, at k for ConvTranspose.
    const int64_t k = j % k_size, c_in = transposed(c) ? 0 : (j / k_size) % w.shape()[1];
    const int64_t row_len = transposed(c) ? 1 : w.shape()[1];
    wide.data<float>()[(j * row_len + c_in) * k_size + k] = 1.0f;
  }
  Tensor yw = run_op(c.op, {in(x), in(wide)}, wide_attrs)[0];  // (N, J, O...)
  const int64_t mg = m_out / group;
  for (int64_t j = 0; j < j_count; ++j) {
    // The output channel the j-th unit weight writes.
    const int64_t m = transposed(c) ? (j / (w.shape()[1] * k_size)) / (w.shape()[0] / group) * mg +
                                          (j / k_size) % w.shape()[1]
                                    : j / (w.shape()[1] * k_size);
    double s = 0;
    for (int64_t n = 0; n < n_batch; ++n)
      s += dot(dy, (n * m_out + m) * o_size, yw, (n * j_count + j) * o_size, o_size);
    r.dw.data<float>()[j] = static_cast<float>(s);
  }
  for (int64_t m = 0; m < m_out; ++m) {
    double s = 0;
    for (int64_t n = 0; n < n_batch; ++n)
      for (int64_t o = 0; o < o_size; ++o) s += dy.data<float>()[(n * m_out + m) * o_size + o];
    r.db.data<float>()[m] = static_cast<float>(s);
  }
  return r;
}

// What the kernel builds, for calling the oneDNN and plain paths directly.
exec::cpu::ConvGradArgs grad_args(const Case& c, const Tensor& x, const Tensor& w, const Tensor& dy,
                                  Grads& out) {
  ir::Node node;
  node.op_type = c.op;
  node.attrs = c.attrs;
  exec::cpu::ConvGradArgs g;
  exec::cpu::ConvArgs& a = g.conv;
  a.transposed = transposed(c);
  a.group = node.attr_int("group", 1);
  a.x = x.shape();
  a.w = w.shape();
  a.y = dy.shape();
  Shape in_sp(a.x.begin() + 2, a.x.end());
  Ints kernel(a.w.begin() + 2, a.w.end());
  a.geo = a.transposed ? ir::transpose_geometry(node, in_sp, kernel)
                       : ir::window_geometry(node, in_sp, kernel, false);
  a.x_data = x.data<float>();
  a.w_data = w.data<float>();
  g.dy = dy.data<float>();
  g.dx = out.dx.data<float>();
  g.dw = out.dw.data<float>();
  g.db = out.db.data<float>();
  return g;
}

void check(const Case& c, bool dnnl_expressible = true) {
  SCOPED_TRACE(std::string(c.op) + " x " + ir::shape_str(c.x) + " w " + ir::shape_str(c.w));
  Tensor x = wave(c.x, 0.3), w = wave(c.w, 1.1, 0.5);
  Tensor y = run_op(c.op, {in(x), in(w)}, c.attrs)[0];
  Tensor dy = wave(y.shape(), 2.0);
  Grads want = reference(c, x, w, dy);

  auto got = run_op(std::string(c.op) + "Grad", {in(dy), in(x), in(w)}, c.attrs, 3);
  expect_close(got[0], want.dx);
  expect_close(got[1], want.dw);
  expect_close(got[2], want.db);
  // dB outside oneDNN (the plain and batched-GEMM paths) sums as the device
  // backends' shared kernel does: the portable backend's bits.
  auto portable = exec::make_portable_backend();
  const Tensor device_db = run_op(std::string(c.op) + "Grad", {in(dy), in(x), in(w)}, c.attrs, 3,
                                  false, 0, {}, portable.get())[2];

  {
    // The batched-GEMM path takes a Conv of one group with at most 8 output
    // positions per image, and nothing else.
    Grads direct{zeros(x.shape()), zeros(w.shape()), zeros({dy.shape()[1]})};
    exec::cpu::ConvGradArgs g = grad_args(c, x, w, dy, direct);
    const int64_t positions = ir::numel(dy.shape()) / (dy.shape()[0] * dy.shape()[1]);
    const bool small = !transposed(c) && g.conv.group == 1 && positions <= 8;
    ASSERT_EQ(exec::cpu::conv_grad_small_output(g), small);
    if (small) {
      SCOPED_TRACE("batched GEMMs");
      expect_close(direct.dx, want.dx);
      expect_close(direct.dw, want.dw);
      expect_close(direct.db, want.db);
      expect_same_bits(direct.db, device_db);
    }
  }
  for (bool use_dnnl : {true, false}) {
    SCOPED_TRACE(use_dnnl ? "oneDNN" : "plain");
    Grads direct{zeros(x.shape()), zeros(w.shape()), zeros({dy.shape()[1]})};
    exec::cpu::ConvGradArgs g = grad_args(c, x, w, dy, direct);
    if (use_dnnl) {
      ASSERT_EQ(exec::cpu::conv_grad_dnnl(g), dnnl_expressible);
      if (!dnnl_expressible) continue;
    } else {
      exec::cpu::conv_grad_plain(g);
      expect_same_bits(direct.db, device_db);
    }
    expect_close(direct.dx, want.dx);
    expect_close(direct.dw, want.dw);
    expect_close(direct.db, want.db);
  }
}

TEST(ConvGrad, Conv2dPadded) {
  check({"Conv", {2, 2, 5, 5}, {3, 2, 3, 3}, {{"pads", Ints{1, 1, 1, 1}}}});
}

TEST(ConvGrad, Conv2dStridedDilatedAsymmetricPads) {
  check({"Conv",
         {1, 2, 7, 6},
         {2, 2, 2, 3},
         {{"strides", Ints{2, 1}}, {"dilations", Ints{2, 1}}, {"pads", Ints{1, 0, 0, 1}}}});
}

TEST(ConvGrad, Conv2dGroups) {
  check({"Conv",
         {2, 4, 5, 4},
         {4, 2, 2, 2},
         {{"group", int64_t{2}}, {"strides", Ints{1, 2}}, {"pads", Ints{0, 1, 1, 0}}}});
}

TEST(ConvGrad, Conv2dDepthwise) {
  check({"Conv",
         {2, 3, 5, 5},
         {3, 1, 3, 3},
         {{"group", int64_t{3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}});
}

TEST(ConvGrad, Conv2dAutoPadSameUpper) {
  check({"Conv",
         {1, 2, 5, 6},
         {2, 2, 3, 3},
         {{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 2}}}});
}

TEST(ConvGrad, Conv1d) {
  check({"Conv",
         {2, 3, 9},
         {2, 3, 3},
         {{"strides", Ints{2}}, {"dilations", Ints{2}}, {"pads", Ints{2, 1}}}});
}

TEST(ConvGrad, Conv3d) {
  check({"Conv",
         {1, 2, 4, 4, 3},
         {2, 2, 2, 2, 2},
         {{"strides", Ints{1, 2, 1}}, {"pads", Ints{1, 0, 1, 0, 1, 0}}}});
}

// Outputs of at most 8 positions per image (ResNet's last stage) run as two
// GEMMs over the whole batch (conv_small_output.cc): padded, strided, 1x1, 1-D, 3-D.
TEST(ConvGrad, SmallOutputsAsBatchedGemms) {
  check({"Conv", {3, 4, 2, 2}, {5, 4, 3, 3}, {{"pads", Ints{1, 1, 1, 1}}}});
  check(
      {"Conv", {2, 3, 4, 4}, {4, 3, 3, 3}, {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}});
  check({"Conv", {2, 3, 4, 4}, {4, 3, 1, 1}, {{"strides", Ints{2, 2}}}});
  check({"Conv", {2, 3, 6, 3}, {2, 3, 3, 2}, {{"strides", Ints{2, 1}}, {"dilations", Ints{1, 2}}}});
  check({"Conv", {2, 3, 7}, {2, 3, 3}, {{"strides", Ints{2}}, {"pads", Ints{1, 0}}}});
  check({"Conv", {1, 2, 3, 3, 2}, {2, 2, 2, 2, 2}, {{"pads", Ints{0, 1, 0, 1, 0, 1}}}});
  check({"Conv", {2, 4, 2, 2}, {4, 2, 3, 3}, {{"group", int64_t{2}}, {"pads", Ints{1, 1, 1, 1}}}});
}

TEST(ConvTransposeGrad, Deconv2dStridedOutputPadding) {
  check({"ConvTranspose",
         {2, 3, 3, 3},
         {3, 2, 3, 3},
         {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"output_padding", Ints{1, 1}}}});
}

TEST(ConvTransposeGrad, Deconv2dGroupsDilated) {
  check({"ConvTranspose",
         {1, 4, 3, 4},
         {4, 1, 2, 3},
         {{"group", int64_t{2}}, {"dilations", Ints{2, 1}}, {"strides", Ints{1, 2}}}});
}

TEST(ConvTransposeGrad, Deconv2dDepthwise) {
  check({"ConvTranspose",
         {2, 3, 4, 4},
         {3, 1, 3, 3},
         {{"group", int64_t{3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 0, 1}}}});
}

TEST(ConvTransposeGrad, Deconv1d) {
  check({"ConvTranspose", {2, 2, 5}, {2, 3, 3}, {{"strides", Ints{3}}, {"pads", Ints{1, 0}}}});
}

TEST(ConvTransposeGrad, Deconv3d) {
  check({"ConvTranspose",
         {1, 2, 2, 3, 2},
         {2, 1, 2, 2, 2},
         {{"strides", Ints{2, 1, 2}}, {"output_padding", Ints{1, 0, 0}}}});
}

TEST(ConvTransposeGrad, OutputShapeWithNegativeBeginPadsRunsThePlainPath) {
  // Full output 4x5, output_shape 6x7: pads -1 before and after on both axes,
  // which oneDNN cannot express.
  check({"ConvTranspose", {1, 2, 3, 4}, {2, 2, 2, 2}, {{"output_shape", Ints{6, 7}}}},
        /*dnnl_expressible=*/false);
}

TEST(ConvTransposeGrad, AutoPadSameLower) {
  check({"ConvTranspose",
         {1, 2, 3, 3},
         {2, 1, 3, 3},
         {{"auto_pad", std::string("SAME_LOWER")}, {"strides", Ints{2, 2}}}});
}

// Absent outputs are not computed; the others match the full run (dB alone
// is a plain sum, with dW it comes fused out of oneDNN's weights primitive).
TEST(ConvGrad, OnlyTheRequestedOutputs) {
  Case c{"Conv", {2, 2, 5, 5}, {3, 2, 3, 3}, {{"pads", Ints{1, 1, 1, 1}}}};
  Tensor x = wave(c.x, 0.3), w = wave(c.w, 1.1, 0.5), dy = wave({2, 3, 5, 5}, 2.0);
  auto full = run_op("ConvGrad", {in(dy), in(x), in(w)}, c.attrs, 3);
  for (std::set<size_t> absent : {std::set<size_t>{0}, {1}, {2}, {0, 1}, {1, 2}, {0, 2}}) {
    auto part = run_op("ConvGrad", {in(dy), in(x), in(w)}, c.attrs, 3, false, 0, absent);
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(part[k].defined(), !absent.count(k));
      if (part[k].defined()) expect_close(part[k], full[k]);
    }
  }
}

// The backward-data primitive's weights are cached as the forward's are
// (conv_test's WeightCacheFollowsValuesVersion): per (buffer, values_version)
// of a graph value, so the microbatches of one update reorder them once. The
// same version reuses them even if the bytes changed; a new version, a
// non-value or version 0 reorders anew.
TEST(ConvGrad, BackwardDataWeightCacheFollowsValuesVersion) {
  const Case c{"Conv", {2, 16, 7, 7}, {8, 16, 3, 3}, {{"pads", Ints{1, 1, 1, 1}}}};
  Tensor x = wave(c.x, 0.3), w = wave(c.w, 1.1, 0.5), dy = wave({2, 8, 7, 7}, 2.0);
  const Tensor w1 = wave(c.w, 1.1, 0.5), w2 = wave(c.w, 0.7, 0.1);
  auto dx_of = [&](const Tensor& weights, bool dnnl, bool is_value, uint64_t version) {
    Grads r{zeros(x.shape()), zeros(w.shape()), zeros({8})};
    exec::cpu::ConvGradArgs g = grad_args(c, x, weights, dy, r);
    g.dw = g.db = nullptr;
    g.conv.w_is_value = is_value;
    g.conv.values_version = version;
    if (dnnl)
      EXPECT_TRUE(exec::cpu::conv_grad_dnnl(g));
    else
      exec::cpu::conv_grad_plain(g);
    return r.dx;
  };
  const Tensor want1 = dx_of(w1, false, false, 0), want2 = dx_of(w2, false, false, 0);
  const uint64_t v = 0x5eed0002;  // a version no other test uses
  expect_close(dx_of(w, true, true, v), want1);
  std::memcpy(w.raw(), w2.raw(), w.nbytes());  // changed in place, version not bumped
  expect_close(dx_of(w, true, true, v), want1);
  expect_close(dx_of(w, true, false, v), want2);
  expect_close(dx_of(w, true, true, v + 1), want2);
  std::memcpy(w.raw(), w1.raw(), w.nbytes());
  expect_close(dx_of(w, true, true, 0), want1);
  std::memcpy(w.raw(), w2.raw(), w.nbytes());
  expect_close(dx_of(w, true, true, 0), want2);
}

TEST(ConvGrad, RefusesADyThatDoesNotMatchTheForward) {
  Tensor x = wave({1, 2, 5, 5}), w = wave({3, 2, 3, 3});
  EXPECT_THROW(run_op("ConvGrad", {in(wave({1, 3, 4, 4})), in(x), in(w)}, {}, 3), ModelError);
  EXPECT_THROW(run_op("ConvTransposeGrad", {in(wave({1, 3, 7, 7})), in(x), in(w)}, {}, 3),
               ModelError);
}

TEST(ConvGrad, ThreadCountDoesNotMatter) {
  Case c{"Conv", {2, 4, 6, 6}, {4, 2, 3, 3}, {{"group", int64_t{2}}, {"pads", Ints{1, 1, 1, 1}}}};
  Tensor x = wave(c.x, 0.3), w = wave(c.w, 1.1, 0.5), dy = wave({2, 4, 6, 6}, 2.0);
  auto one = run_op("ConvGrad", {in(dy), in(x), in(w)}, c.attrs, 3);
  exec::set_cpu_threads(2);
  auto two = run_op("ConvGrad", {in(dy), in(x), in(w)}, c.attrs, 3);
  exec::set_cpu_threads(1);
  for (size_t k = 0; k < 3; ++k) expect_close(two[k], one[k]);
}

// PyTorch autograd (torch 1.13, float64) on the wave inputs:
//   x = wave((1,4,5,5), .3); w = wave((4,2,3,3), 1.1, .5); dy = wave(y.shape, 2.)
//   y = F.conv2d(x, w, stride=2, padding=1, groups=2); y.backward(dy)
TEST(ConvGrad, MatchesPyTorch) {
  Tensor x = wave({1, 4, 5, 5}, 0.3), w = wave({4, 2, 3, 3}, 1.1, 0.5);
  Tensor dy = wave({1, 4, 3, 3}, 2.0);
  auto g = run_op("ConvGrad", {in(dy), in(x), in(w)},
                  {{"group", int64_t{2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, 3);
  expect_close(
      g[0],
      std::vector<float>{
          0.1672228,    0.2964163,   0.1350741,  0.2182298,  0.08464382,  0.1794207,   0.2941672,
          0.1149013,    0.1487381,   0.0348306,  0.02275737, -0.01217265, -0.04220917, -0.1332046,
          -0.1014629,   -0.04995429, -0.1801053, -0.1279781, -0.3190122,  -0.1886807,  -0.1469841,
          -0.3072417,   -0.1726117,  -0.3366917, -0.1748771, -0.1672368,  -0.2874986,  -0.1281072,
          -0.1959572,   -0.07163898, -0.1458264, -0.2183272, -0.07221287, -0.06046205, 0.01117431,
          -0.005474715, 0.05071196,  0.06143053, 0.1724542,  0.1200214,   0.09304912,  0.2573441,
          0.1623302,    0.3742716,   0.2096406,  0.162368,   0.332598,    0.1827388,   0.3493247,
          0.1783768,    0.08070892,  0.08966255, 0.01848617, -0.03370813, -0.04623859, -0.06625553,
          -0.2072093,   -0.1416742,  -0.3397311, -0.197918,  -0.1047052,  -0.2506826,  -0.1490004,
          -0.31492,     -0.1731291,  -0.2273745, -0.4551187, -0.226057,   -0.4223674,  -0.1941437,
          -0.1738256,   -0.3126004,  -0.1509957, -0.2463575, -0.1077291,  -0.05863249, -0.04672149,
          0.001028679,  0.06949097,  0.06055063, 0.1093826,  0.2848069,   0.1765518,   0.3960736,
          0.2198256,    0.1118773,   0.2592442,  0.148062,   0.3071028,   0.1642071,   0.2333471,
          0.4499829,    0.2152861,   0.3853292,  0.1680872,  0.1581276,   0.2772734,   0.1306462,
          0.2036226,    0.08548254},
      1e-4, 1e-5);
  expect_close(
      g[1],
      std::vector<float>{-0.6610062,  -0.5202173, -0.5083738, 0.2027882,   0.09589111, 0.0960882,
                         -0.02666172, 0.07430407, 0.2372206,  0.5065421,   0.277149,   0.2660161,
                         0.05650597,  0.2556479,  0.1983585,  -0.285621,   -0.4438278, -0.5220705,
                         0.7051947,   0.5749189,  0.5962504,  -0.2473559,  -0.1119518, -0.1530198,
                         0.1619303,   0.04269948, -0.1046624, -0.6044015,  -0.3908204, -0.3952103,
                         0.01994548,  -0.2104449, -0.1283299, 0.148089,    0.3367532,  0.4086642,
                         -0.616569,   -0.3570967, -0.3422576, -0.09470268, -0.4348298, -0.3104163,
                         0.3019376,   0.5870769,  0.5846326,  0.5334815,   0.2126528,  0.1636697,
                         0.2822108,   0.6986167,  0.557615,   -0.5893593,  -0.9385056, -0.8706575,
                         0.7261236,   0.5067409,  0.4902736,  -0.02201908, 0.3278404,  0.2040768,
                         -0.1395927,  -0.4474304, -0.4483596, -0.6968821,  -0.4249081, -0.3580499,
                         -0.1246826,  -0.5461338, -0.4246493, 0.4125774,   0.7901679,  0.7400717},
      1e-4, 1e-5);
  expect_close(g[2], std::vector<float>{-1.79679, 2.721189, -3.549278, 4.25175}, 1e-4, 1e-5);
}

//   x = wave((1,4,3,3), .3); w = wave((4,1,3,3), 1.1, .5); dy = wave(y.shape, 2.)
//   y = F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1, groups=2)
TEST(ConvTransposeGrad, MatchesPyTorch) {
  Tensor x = wave({1, 4, 3, 3}, 0.3), w = wave({4, 1, 3, 3}, 1.1, 0.5);
  Tensor dy = wave({1, 2, 6, 6}, 2.0);
  auto g = run_op("ConvTransposeGrad", {in(dy), in(x), in(w)},
                  {{"group", int64_t{2}},
                   {"strides", Ints{2, 2}},
                   {"pads", Ints{1, 1, 1, 1}},
                   {"output_padding", Ints{1, 1}}},
                  3);
  expect_close(
      g[0],
      std::vector<float>{0.93255,    1.051596,   0.1622775,  -1.160586,  -0.722989,  0.5480291,
                         -0.2715447, -1.350891,  -1.758195,  -0.9067174, -1.175443,  -0.3749417,
                         1.25943,    0.9371112,  -0.4219271, 0.1873959,  1.339022,   1.897102,
                         0.807343,   0.5574342,  -0.4271136, -0.6382136, 0.3076574,  1.549988,
                         -1.022283,  -1.972203,  -1.612484,  -0.8315816, -0.7383946, 0.2006323,
                         0.7093246,  -0.1572992, -1.47023,   0.9411081,  1.976428,   1.721665},
      1e-4, 1e-5);
  expect_close(
      g[1],
      std::vector<float>{-1.517451,  -1.792241,  -1.710074,  1.574037,   1.222475,  1.134317,
                         -1.148672,  -0.7510109, -1.04904,   1.375241,   1.680735,  1.488862,
                         -1.811084,  -1.59797,   -1.282917,  1.65961,    1.421847,  1.660832,
                         -0.3197941, -0.7364239, -0.1725425, 0.6630142,  0.6388678, -0.1711736,
                         -2.147588,  -2.075351,  -1.655357,  -0.0118593, 0.3690268, -0.1929718,
                         -0.4670209, -0.4814158, 0.5113372,  2.315054,   2.40611,   1.801479},
      1e-4, 1e-5);
  expect_close(g[2], std::vector<float>{1.626871, 0.3898579}, 1e-4, 1e-5);
}

}  // namespace
}  // namespace pipetrain::test
