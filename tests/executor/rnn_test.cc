#include <gtest/gtest.h>

#include "tests/executor/nn_test_util.h"

namespace pipetrain::test {
namespace {

using ir::Shape;
using ir::Tensor;

// Expected values from a numpy port of the ONNX LSTM equations, itself checked
// against torch.nn.LSTM (gates reordered i, f, g, o -> i, o, f, c) to 1e-7.
// Inputs: T 3, batch 2, input 2, hidden 2.
struct Inputs {
  Tensor x = wave({3, 2, 2});
  Tensor w = wave({2, 8, 2}, 1.0, 0.5);
  Tensor r = wave({2, 8, 2}, 2.0, 0.5);
  Tensor b = wave({2, 16}, 3.0, 0.2);
  Tensor p = wave({2, 6}, 4.0, 0.3);
  Tensor h0 = wave({2, 2, 2}, 5.0, 0.4);
  Tensor c0 = wave({2, 2, 2}, 6.0, 0.4);
};

TEST(LSTM, BidirectionalWithLengthsStatesAndPeepholes) {
  Inputs v;
  Tensor lens(ir::DType::kI32, {2});
  lens.data<int32_t>()[0] = 3;
  lens.data<int32_t>()[1] = 2;
  auto out =
      run_op("LSTM", {in(v.x), in(v.w), in(v.r), in(v.b), in(lens), in(v.h0), in(v.c0), in(v.p)},
             {{"direction", std::string("bidirectional")}, {"hidden_size", int64_t{2}}}, 3);
  ASSERT_EQ(out[0].shape(), (Shape{3, 2, 2, 2}));
  // Batch entry 1 stops after 2 steps: its Y rows at t = 2 are zero in both directions.
  expect_close(out[0], {-0.079087f, -0.054074f, -0.128003f, 0.042992f, -0.119603f, -0.035669f,
                        -0.245669f, -0.043002f, -0.252734f, 0.001622f, -0.188142f, 0.022095f,
                        -0.243277f, -0.032259f, -0.126972f, 0.055556f, -0.127660f, -0.026128f,
                        0.000000f,  0.000000f,  0.089221f,  0.118041f, 0.000000f,  0.000000f},
               1e-4, 2e-6);
  expect_close(out[1],
               {-0.127660f, -0.026128f, -0.188142f, 0.022095f, -0.119603f, -0.035669f, -0.245669f,
                -0.043002f},
               1e-4, 2e-6);
  expect_close(out[2],
               {-0.246648f, -0.049008f, -0.326188f, 0.047702f, -0.239993f, -0.070443f, -0.429563f,
                -0.085363f},
               1e-4, 2e-6);
}

TEST(LSTM, ReverseWithClipAndInputForget) {
  Inputs v;
  Tensor w = wave({1, 8, 2}, 1.0, 0.5), r = wave({1, 8, 2}, 2.0, 0.5);
  auto out = run_op("LSTM", {in(v.x), in(w), in(r)},
                    {{"direction", std::string("reverse")},
                     {"hidden_size", int64_t{2}},
                     {"clip", 0.5f},
                     {"input_forget", int64_t{1}}},
                    3);
  expect_close(out[0],
               {-0.095798f, 0.005210f, -0.193340f, 0.015105f, -0.173427f, 0.015997f, -0.110460f,
                0.007253f, -0.006226f, -0.008674f, 0.058689f, -0.016167f},
               1e-4, 2e-6);
  expect_close(out[1], {-0.095798f, 0.005210f, -0.193340f, 0.015105f}, 1e-4, 2e-6);
  expect_close(out[2], {-0.186766f, 0.010473f, -0.342079f, 0.033120f}, 1e-4, 2e-6);
}

TEST(LSTM, BatchMajorLayoutMatchesSequenceMajor) {
  Inputs v;
  Tensor w = wave({1, 8, 2}, 1.0, 0.5), r = wave({1, 8, 2}, 2.0, 0.5), b = wave({1, 16}, 3.0);
  auto seq_major = run_op("LSTM", {in(v.x), in(w), in(r), in(b)}, {{"hidden_size", int64_t{2}}}, 3);
  // Transpose X (T, batch, I) -> (batch, T, I).
  Tensor xt(ir::DType::kF32, {2, 3, 2});
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t i = 0; i < 2; ++i)
        xt.data<float>()[(n * 3 + t) * 2 + i] = v.x.data<float>()[(t * 2 + n) * 2 + i];
  auto batch_major = run_op("LSTM", {in(xt), in(w), in(r), in(b)},
                            {{"hidden_size", int64_t{2}}, {"layout", int64_t{1}}}, 3);
  ASSERT_EQ(batch_major[0].shape(), (Shape{2, 3, 1, 2}));
  ASSERT_EQ(batch_major[1].shape(), (Shape{2, 1, 2}));
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t j = 0; j < 2; ++j)
        EXPECT_FLOAT_EQ(batch_major[0].data<float>()[(n * 3 + t) * 2 + j],
                        seq_major[0].data<float>()[(t * 2 + n) * 2 + j]);
  expect_close(batch_major[1], seq_major[1].reshaped({2, 1, 2}));
  expect_close(batch_major[2], seq_major[2].reshaped({2, 1, 2}));
}

TEST(LSTM, UnsupportedAndInvalidAttributes) {
  Inputs v;
  Tensor w = wave({1, 8, 2}), r = wave({1, 8, 2});
  EXPECT_THROW(run_op("LSTM", {in(v.x), in(w), in(r)},
                      {{"activations", std::vector<std::string>{"Relu", "Tanh", "Tanh"}}}),
               UnsupportedOp);
  EXPECT_NO_THROW(run_op("LSTM", {in(v.x), in(w), in(r)},
                         {{"activations", std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}}}));
  EXPECT_THROW(run_op("LSTM", {in(v.x), in(w), in(r)}, {{"hidden_size", int64_t{3}}}), ModelError);
  EXPECT_THROW(run_op("LSTM", {in(v.x), in(wave({1, 8, 3})), in(r)}), ModelError);
}

}  // namespace
}  // namespace pipetrain::test
