// The CPU backend's bf16 mixed precision (executor/cpu/kernels/bf16.h)
// against the portable backend's, which is the rounding rule itself (inputs
// rounded, fp32 arithmetic, outputs rounded: device_parity_test checks it):
// every output on the bf16 grid, equal but for the last bf16 bit where the
// fp32 sums, added in another order, round the other way. Each op runs on
// shapes that take oneDNN's bf16 kernels and on ones that take the other
// paths. Skipped on a CPU without bf16 arithmetic, where the backend must
// refuse (ctest runs this file once more with oneDNN held to AVX2).
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "executor/backend.h"
#include "executor/cpu/kernels/bf16.h"
#include "ir/error.h"
#include "tests/executor/op_test_util.h"

namespace pipetrain::test {
namespace {

using ir::Attribute;
using Ints = std::vector<int64_t>;

exec::CpuBackendOptions bf16_options() {
  exec::CpuBackendOptions o;
  o.precision = exec::Precision::kBf16;
  return o;
}

ir::Tensor random_tensor(const ir::Shape& shape, uint64_t seed) {
  ir::Tensor t(ir::DType::kF32, shape);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = nd(rng);
  return t;
}

bool on_bf16_grid(const ir::Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint32_t b;
    std::memcpy(&b, t.data<float>() + i, 4);
    if (b & 0xffffu) return false;
  }
  return true;
}

// Elements whose bits differ.
int64_t differing(const ir::Tensor& a, const ir::Tensor& b) {
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    n += std::memcmp(a.data<float>() + i, b.data<float>() + i, 4) != 0;
  return n;
}

double max_abs(const ir::Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(double(t.at(i))));
  return m;
}

struct OpCase {
  std::string name, op;
  std::vector<ir::Shape> inputs;
  std::map<std::string, Attribute> attrs;
  size_t outputs = 1;
};

std::vector<OpCase> cases() {
  const Attribute k3(Ints{3, 3}), pad1(Ints{1, 1, 1, 1}), one(int64_t{1});
  return {
      {"Gemm transB bias alpha",
       "Gemm",
       {{24, 40}, {16, 40}, {16}},
       {{"transB", one}, {"alpha", Attribute(0.5f)}, {"beta", Attribute(2.0f)}}},
      {"Gemm transA", "Gemm", {{40, 24}, {40, 16}}, {{"transA", one}}},
      {"MatMul one B", "MatMul", {{3, 20, 48}, {48, 32}}, {}},
      {"MatMul batched transB", "MatMul", {{4, 17, 32}, {4, 9, 32}}, {{"transB", one}}},
      {"MatMul broadcast transA", "MatMul", {{2, 1, 32, 12}, {3, 32, 8}}, {{"transA", one}}},
      {"Conv oneDNN bias",
       "Conv",
       {{2, 8, 12, 12}, {16, 8, 3, 3}, {16}},
       {{"kernel_shape", k3}, {"pads", pad1}}},
      {"Conv few output positions",
       "Conv",
       {{4, 16, 2, 2}, {8, 16, 3, 3}, {8}},
       {{"kernel_shape", k3}, {"pads", pad1}}},
      {"Conv strided, no pad",
       "Conv",
       {{2, 3, 11, 11}, {8, 3, 3, 3}},
       {{"kernel_shape", k3}, {"strides", Attribute(Ints{2, 2})}}},
      {"ConvGrad oneDNN",
       "ConvGrad",
       {{2, 16, 12, 12}, {2, 8, 12, 12}, {16, 8, 3, 3}},
       {{"kernel_shape", k3}, {"pads", pad1}},
       3},
      {"ConvGrad few output positions",
       "ConvGrad",
       {{4, 8, 2, 2}, {4, 16, 2, 2}, {8, 16, 3, 3}},
       {{"kernel_shape", k3}, {"pads", pad1}},
       3},
      {"ConvTranspose (rounded copies)",
       "ConvTranspose",
       {{2, 8, 5, 5}, {8, 4, 3, 3}},
       {{"kernel_shape", k3}}},
  };
}

TEST(CpuBf16, RefusedWhereTheCpuHasNoBf16Arithmetic) {
  if (exec::cpu::native_bf16()) {
    EXPECT_NO_THROW(exec::make_cpu_backend(bf16_options()));
    return;
  }
  try {
    exec::make_cpu_backend(bf16_options());
    ADD_FAILURE() << "bf16 accepted on " << exec::cpu::dnnl_isa_name();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("needs a CPU with AVX512-BF16 or AMX"), std::string::npos)
        << e.what();
  }
}

TEST(CpuBf16, OpsFollowTheRoundingRuleOfThePortableBackend) {
  if (!exec::cpu::native_bf16())
    GTEST_SKIP() << "no bf16 arithmetic (" << exec::cpu::dnnl_isa_name() << ")";
  auto cpu = exec::make_cpu_backend(bf16_options());
  auto portable = exec::make_portable_backend(exec::Precision::kBf16);
  uint64_t seed = 1;
  for (const OpCase& c : cases()) {
    std::vector<OpInput> ins;
    std::vector<ir::Tensor> originals;
    for (const ir::Shape& s : c.inputs) {
      ins.push_back(in(random_tensor(s, seed++)));
      originals.push_back(ins.back().value.clone());
    }
    const auto got = run_op(c.op, ins, c.attrs, c.outputs, false, 0, {}, cpu.get());
    const auto want = run_op(c.op, ins, c.attrs, c.outputs, false, 0, {}, portable.get());
    const auto fp32 = run_op(c.op, ins, c.attrs, c.outputs);
    for (size_t k = 0; k < c.outputs; ++k) {
      EXPECT_TRUE(on_bf16_grid(got[k])) << c.name << ": output " << k;
      // One bf16 step (2^-8 relative) where the fp32 sums round apart; an
      // absolute floor for sums that cancel to near zero.
      EXPECT_LE(closeness(got[k], want[k], 1.0 / 128, 1e-5 * max_abs(want[k])), 1.0)
          << c.name << ": output " << k;
      // and that rarely: the two fp32 sums differ by far less than a bf16 step.
      EXPECT_LE(differing(got[k], want[k]) * 100, want[k].numel()) << c.name << ": output " << k;
      EXPECT_GT(closeness(got[k], fp32[k], 1e-6, 0.0), 1.0) << c.name << ": bf16 changed nothing";
    }
    for (size_t i = 0; i < ins.size(); ++i)
      EXPECT_EQ(std::memcmp(ins[i].value.raw(), originals[i].raw(), originals[i].nbytes()), 0)
          << c.name << ": input " << i << " was rounded in place (a master weight, say)";
  }
}

}  // namespace
}  // namespace pipetrain::test
