// Helpers for the nn-family kernel tests (linalg, conv, pool, norm, rnn):
// deterministic inputs that the Python scripts which produced the pasted
// expectations compute the same way, and a closeness check that names the
// worst element.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tests/executor/op_test_util.h"

namespace pipetrain::test {

/// x[i] = scale * sin(0.37 i + phase) in row-major order, as f32
/// (numpy: (np.sin(0.37 * np.arange(n) + phase) * scale).astype(np.float32)).
inline ir::Tensor wave(ir::Shape shape, double phase = 0.0, double scale = 1.0) {
  ir::Tensor t(ir::DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] =
        static_cast<float>(std::sin(0.37 * static_cast<double>(i) + phase) * scale);
  return t;
}

/// wave() rounded to multiples of 0.5 (plateaus of ties), with signed zeros
/// (every 7th element -0, every 5th +0) and a NaN at element 3 and at every
/// 61st: the inputs on which a max or argmax kernel shows its tap order.
inline ir::Tensor ties_zeros_and_nans(ir::Shape shape) {
  ir::Tensor t = wave(std::move(shape), 0.4, 2.0);
  float* v = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    v[i] = std::round(v[i] * 2) / 2;
    if (i % 7 == 0) v[i] = -0.0f;
    if (i % 5 == 0) v[i] = 0.0f;
    if (i == 3 || i % 61 == 60) v[i] = std::numeric_limits<float>::quiet_NaN();
  }
  return t;
}

/// Checks shape and every element's bits (signed zeros and NaNs included).
inline void expect_same_bits(const ir::Tensor& got, const ir::Tensor& want) {
  ASSERT_EQ(ir::shape_str(got.shape()), ir::shape_str(want.shape()));
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(got.data<float>()[i]),
              std::bit_cast<uint32_t>(want.data<float>()[i]))
        << "element " << i << ": got " << got.data<float>()[i] << ", want "
        << want.data<float>()[i];
}

/// Checks shape and values; on failure names the worst element.
inline void expect_close(const ir::Tensor& got, const ir::Tensor& want, double rtol = 1e-4,
                         double atol = 1e-5) {
  ASSERT_EQ(ir::shape_str(got.shape()), ir::shape_str(want.shape()));
  int64_t worst = -1;
  double worst_r = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double r = std::abs(got.at(i) - want.at(i)) / (atol + rtol * std::abs(want.at(i)));
    if (std::isnan(got.at(i)) != std::isnan(want.at(i))) r = 1e30;
    if (r > worst_r) {
      worst_r = r;
      worst = i;
    }
  }
  EXPECT_LE(worst_r, 1.0) << "worst element " << worst << ": got " << got.at(worst) << ", want "
                          << want.at(worst);
}

inline void expect_close(const ir::Tensor& got, const std::vector<float>& want, double rtol = 1e-4,
                         double atol = 1e-5) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  expect_close(got, ir::Tensor::from_f32(want, got.shape()), rtol, atol);
}

}  // namespace pipetrain::test
