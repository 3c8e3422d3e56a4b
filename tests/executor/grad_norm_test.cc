// BatchNormalizationGrad and LayerNormalizationGrad: against PyTorch autograd
// (values pasted) and against central differences of the forward kernels
// (norm.cc) through run_op, over shapes, axes and broadcast parameters.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/executor/nn_test_util.h"

namespace pipetrain::test {
namespace {

using ir::Shape;
using ir::Tensor;
using Attrs = std::map<std::string, ir::Attribute>;

Tensor plus_one(Tensor t) {
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] += 1.0f;
  return t;
}

// dL/d inputs[k] for L = sum(dy * op(inputs)[0]) by the 4-point central
// difference (error O(h^4)), L summed in double.
Tensor numeric_grad(const std::string& op, std::vector<Tensor> inputs, size_t k, const Attrs& attrs,
                    const Tensor& dy, double h) {
  auto loss = [&]() {
    std::vector<OpInput> ins;
    for (const Tensor& t : inputs) ins.push_back(in(t));
    Tensor y = run_op(op, ins, attrs)[0];
    double l = 0;
    for (int64_t i = 0; i < y.numel(); ++i)
      l += static_cast<double>(dy.data<float>()[i]) * y.data<float>()[i];
    return l;
  };
  Tensor& v = inputs[k] = inputs[k].clone();
  Tensor g(ir::DType::kF32, v.shape());
  for (int64_t i = 0; i < v.numel(); ++i) {
    const float x0 = v.data<float>()[i];
    double l[4];
    const double steps[4] = {-2 * h, -h, h, 2 * h};
    for (int s = 0; s < 4; ++s) {
      v.data<float>()[i] = static_cast<float>(x0 + steps[s]);
      l[s] = loss();
    }
    v.data<float>()[i] = x0;
    g.data<float>()[i] = static_cast<float>((l[0] - 8 * l[1] + 8 * l[2] - l[3]) / (12 * h));
  }
  return g;
}

// BatchNormalizationGrad (training mode) against differences of
// BatchNormalization with training_mode = 1.
void check_batch_norm(const Shape& xs, float epsilon) {
  SCOPED_TRACE("X " + ir::shape_str(xs));
  const int64_t c = xs[1];
  Tensor x = wave(xs, 0.3, 2.0), scale = plus_one(wave({c}, 1.0, 0.5)), b = wave({c}, 2.0);
  Tensor dy = wave(xs, 2.0);
  Attrs fwd = {{"epsilon", epsilon}, {"training_mode", int64_t{1}}};
  std::vector<Tensor> ins = {x, scale, b, wave({c}, 0.1), plus_one(wave({c}, 0.2, 0.1))};
  auto got =
      run_op("BatchNormalizationGrad", {in(dy), in(x), in(scale)}, {{"epsilon", epsilon}}, 3);
  const double h = 1e-2;
  expect_close(got[0], numeric_grad("BatchNormalization", ins, 0, fwd, dy, h), 1e-3, 1e-4);
  expect_close(got[1], numeric_grad("BatchNormalization", ins, 1, fwd, dy, h), 1e-3, 1e-4);
  expect_close(got[2], numeric_grad("BatchNormalization", ins, 2, fwd, dy, h), 1e-3, 1e-4);
}

// LayerNormalizationGrad against differences of LayerNormalization; scale
// and B have shape `ps` (broadcast to the normalised shape).
void check_layer_norm(const Shape& xs, int64_t axis, const Shape& ps) {
  SCOPED_TRACE("X " + ir::shape_str(xs) + " axis " + std::to_string(axis) + " scale " +
               ir::shape_str(ps));
  Tensor x = wave(xs, 0.3, 2.0), scale = plus_one(wave(ps, 1.0, 0.5)), b = wave(ps, 2.0);
  Tensor dy = wave(xs, 2.0);
  Attrs attrs = {{"axis", axis}, {"epsilon", 1e-5f}};
  auto got = run_op("LayerNormalizationGrad", {in(dy), in(x), in(scale)}, attrs, 3);
  std::vector<Tensor> ins = {x, scale, b};
  const double h = 1e-2;
  expect_close(got[0], numeric_grad("LayerNormalization", ins, 0, attrs, dy, h), 1e-3, 1e-4);
  expect_close(got[1], numeric_grad("LayerNormalization", ins, 1, attrs, dy, h), 1e-3, 1e-4);
  expect_close(got[2], numeric_grad("LayerNormalization", ins, 2, attrs, dy, h), 1e-3, 1e-4);
}

// PyTorch autograd (torch 1.13, float64) on the same inputs:
//   x = wave((2,3,2,2), .3, 2.); s = wave((3,), 1., .5) + 1; b = wave((3,), 2.)
//   y = F.batch_norm(x, None, None, s, b, training=True, eps=1e-5)
//   y.backward(wave(y.shape, 2.))
TEST(BatchNormalizationGrad, MatchesPyTorch) {
  Tensor x = wave({2, 3, 2, 2}, 0.3, 2.0), scale = plus_one(wave({3}, 1.0, 0.5));
  auto g = run_op("BatchNormalizationGrad", {in(wave({2, 3, 2, 2}, 2.0)), in(x), in(scale)},
                  {{"epsilon", 1e-5f}}, 3);
  expect_close(g[0],
               std::vector<float>{0.3521737,  0.1784197, -0.08832698, -0.4119634, -0.005982555,
                                  -0.9646783, -1.929104, -2.768728,   -0.3976138, -0.2170595,
                                  0.06836724, 0.4200353, -0.4326272,  -0.1068864, 0.1644766,
                                  0.3447341,  1.096654,  1.542631,    1.643526,   1.385682,
                                  0.5061402,  0.1457032, -0.1589595,  -0.3666131});
  expect_close(g[1], std::vector<float>{-0.4546449, -2.147537, 0.4658451});
  expect_close(g[2], std::vector<float>{4.423498, 0.1249059, -4.400847});
}

TEST(BatchNormalizationGrad, MatchesDifferencesOfTheForward) {
  check_batch_norm({2, 3, 2, 2}, 1e-5f);
  check_batch_norm({4, 2}, 1e-5f);  // no spatial axes: statistics over N only
  check_batch_norm({2, 2, 3, 1, 2}, 1e-2f);
}

TEST(BatchNormalizationGrad, OnlyTheRequestedOutputs) {
  Tensor x = wave({2, 3, 2, 2}, 0.3, 2.0), scale = plus_one(wave({3}, 1.0, 0.5));
  Tensor dy = wave({2, 3, 2, 2}, 2.0);
  auto full = run_op("BatchNormalizationGrad", {in(dy), in(x), in(scale)}, {}, 3);
  for (std::set<size_t> absent : {std::set<size_t>{0}, {1, 2}, {0, 1}}) {
    auto part =
        run_op("BatchNormalizationGrad", {in(dy), in(x), in(scale)}, {}, 3, false, 0, absent);
    for (size_t k = 0; k < 3; ++k)
      if (!absent.count(k)) expect_close(part[k], full[k]);
  }
}

//   x = wave((2,3,4), .3, 2.); s = wave((3,4), 1., .5) + 1; b = wave((3,4), 2.)
//   y = F.layer_norm(x, (3,4), s, b, eps=1e-5); y.backward(wave(y.shape, 2.))
TEST(LayerNormalizationGrad, MatchesPyTorch) {
  Tensor x = wave({2, 3, 4}, 0.3, 2.0), scale = plus_one(wave({3, 4}, 1.0, 0.5));
  auto g = run_op("LayerNormalizationGrad", {in(wave({2, 3, 4}, 2.0)), in(x), in(scale)},
                  {{"axis", int64_t{-2}}, {"epsilon", 1e-5f}}, 3);
  expect_close(g[0], std::vector<float>{1.065782,    0.8350848,  0.4591993,  0.03317589, -0.3322187,
                                        -0.5532719,  -0.6025741, -0.5114163, -0.3456976, -0.16899,
                                        -0.01241416, 0.1333411,  -0.5729585, -0.1857198, 0.1679199,
                                        0.4032341,   0.4819196,  0.4206566,  0.2745555,  0.1052093,
                                        -0.04951685, -0.1884277, -0.3368311, -0.520041});
  expect_close(g[1], std::vector<float>{-0.2017427, -0.3682596, -0.5931308, -0.7366196, -0.6838082,
                                        -0.4101022, -0.001162788, 0.384117, 0.5892778, 0.5360327,
                                        0.2612879, -0.1033874});
  expect_close(
      g[2], std::vector<float>{1.06547, 1.20006, 1.172228, 0.9857397, 0.6658364, 0.2558153,
                               -0.1888292, -0.6079166, -0.9447253, -1.15367, -1.206471, -1.095981});
}

TEST(LayerNormalizationGrad, MatchesDifferencesOfTheForward) {
  check_layer_norm({2, 3, 4}, -1, {4});
  check_layer_norm({2, 3, 4}, -2, {3, 4});
  check_layer_norm({3, 5}, 0, {3, 5});
  // Broadcast parameters: dscale and dB are summed over the repeated axes.
  check_layer_norm({2, 3, 4}, -2, {4});
  check_layer_norm({2, 3, 4}, 1, {3, 1});
  check_layer_norm({2, 3, 4}, -1, {1, 1, 4});
}

TEST(LayerNormalizationGrad, OnlyTheRequestedOutputs) {
  Tensor x = wave({2, 3, 4}, 0.3, 2.0), scale = plus_one(wave({4}, 1.0, 0.5));
  Tensor dy = wave({2, 3, 4}, 2.0);
  auto full = run_op("LayerNormalizationGrad", {in(dy), in(x), in(scale)}, {}, 3);
  for (std::set<size_t> absent : {std::set<size_t>{0}, {1, 2}, {0, 2}}) {
    auto part =
        run_op("LayerNormalizationGrad", {in(dy), in(x), in(scale)}, {}, 3, false, 0, absent);
    for (size_t k = 0; k < 3; ++k)
      if (!absent.count(k)) expect_close(part[k], full[k]);
  }
}

}  // namespace
}  // namespace pipetrain::test
