// The kernel check (executor/kernel_check.h): every family agrees on this
// CPU, and a family whose kernel is made wrong (an injected fault) is seen,
// avoided, and the backend then computes right through its fallback.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "executor/backend.h"
#include "executor/cpu/kernels/kernel_paths.h"
#include "executor/cpu/kernels/sgemm.h"
#include "executor/kernel_check.h"
#include "tests/executor/op_test_util.h"

namespace pipetrain::test {
namespace {

using exec::KernelCheckReport;
using exec::KernelFamilyCheck;

const KernelFamilyCheck* family(const KernelCheckReport& r, const std::string& path) {
  for (const auto& f : r.families)
    if (f.path == path) return &f;
  return nullptr;
}

// Each test leaves no fault and no avoidance behind.
class KernelCheck : public ::testing::Test {
 protected:
  // The process's own check (the first CPU backend's) runs before any fault is injected.
  void SetUp() override { exec::ensure_kernel_check(); }
  void TearDown() override {
    exec::cpu::set_injected_faults("");
    exec::cpu::clear_avoided();
  }
};

ir::Tensor random(const ir::Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  ir::Tensor t(ir::DType::kF32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

double max_rel_diff(const ir::Tensor& a, const ir::Tensor& b) {
  double err = 0, scale = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    err = std::max(err, std::fabs(double(a.data<float>()[i]) - b.data<float>()[i]));
    scale = std::max(scale, std::fabs(double(b.data<float>()[i])));
  }
  return err / scale;
}

TEST_F(KernelCheck, EveryFamilyAgreesOnThisCpu) {
  const KernelCheckReport r = exec::run_kernel_check();
  EXPECT_TRUE(r.trustworthy());
  for (const char* path :
       {"openblas-gemm", "onednn-gemm", "onednn-matmul", "Conv", "ConvGrad", "MaxPoolGrad",
        "AveragePoolGrad", "BatchNormalization", "BatchNormalizationGrad"}) {
    const KernelFamilyCheck* f = family(r, path);
    ASSERT_NE(f, nullptr) << path;
    EXPECT_FALSE(f->skipped) << path;  // row-major kernels run on every CPU
    EXPECT_GT(f->cases, 0) << path;
    EXPECT_LE(f->worst, 1.0) << path << ": " << f->worst_case;
    EXPECT_FALSE(f->avoided) << path;
  }
  for (const char* path : {"Conv:blocked", "ConvGrad:blocked", "MaxPoolGrad:blocked",
                           "BatchNormalization:blocked", "BatchNormalizationGrad:blocked"}) {
    const KernelFamilyCheck* f = family(r, path);
    ASSERT_NE(f, nullptr) << path;
    EXPECT_TRUE(f->skipped || (f->cases > 0 && f->worst <= 1.0)) << path;
  }
}

// A GEMM library computing wrong is avoided; every product then goes to the other.
TEST_F(KernelCheck, WrongOpenBlasIsAvoidedForOneDnn) {
  exec::cpu::set_injected_faults("openblas-gemm");
  const KernelCheckReport r = exec::run_kernel_check();
  const KernelFamilyCheck* f = family(r, "openblas-gemm");
  ASSERT_NE(f, nullptr);
  EXPECT_GT(f->worst, 1e3);
  EXPECT_TRUE(f->avoided);
  EXPECT_TRUE(f->fallback_ok());
  EXPECT_NE(exec::avoided_notice(*f).find("OpenBLAS"), std::string::npos);
  EXPECT_FALSE(family(r, "onednn-gemm")->avoided);
  EXPECT_TRUE(r.trustworthy());
  // A product large enough for OpenBLAS: right, because it no longer runs there.
  const int64_t m = 200, n = 180, k = 160;
  ir::Tensor a = random({m, k}, 1), b = random({k, n}, 2);
  ir::Tensor y(ir::DType::kF32, {m, n}), want(ir::DType::kF32, {m, n});
  exec::cpu::sgemm(false, false, m, n, k, 1.0f, a.data<float>(), k, b.data<float>(), n, 0.0f,
                   y.data<float>());
  exec::cpu::reference_sgemm(false, false, m, n, k, 1.0f, a.data<float>(), k, b.data<float>(), n,
                             0.0f, want.data<float>(), n);
  EXPECT_LT(max_rel_diff(y, want), 1e-5);
}

TEST_F(KernelCheck, BothGemmLibrariesWrongFallBackToPlainLoops) {
  exec::cpu::set_injected_faults("openblas-gemm,onednn-gemm");
  const KernelCheckReport r = exec::run_kernel_check();
  EXPECT_TRUE(family(r, "openblas-gemm")->avoided);
  EXPECT_TRUE(family(r, "onednn-gemm")->avoided);
  EXPECT_EQ(family(r, "onednn-gemm")->fallback, "plain loops (slow)");
  EXPECT_TRUE(r.trustworthy());
  // The GEMMs inside convolutions (the portable backend's im2col) are right too.
  ir::Tensor x = random({2, 8, 6, 6}, 3), w = random({8, 8, 3, 3}, 4);
  std::map<std::string, ir::Attribute> pads = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  auto got = run_op("ConvGrad", {in(random({2, 8, 6, 6}, 5)), in(x), in(w)}, pads, 3, false, 0, {},
                    exec::make_portable_backend().get());
  exec::cpu::set_injected_faults("");
  exec::cpu::clear_avoided();
  auto want = run_op("ConvGrad", {in(random({2, 8, 6, 6}, 5)), in(x), in(w)}, pads, 3, false, 0, {},
                     exec::make_cpu_backend().get());
  for (size_t i = 0; i < 3; ++i) EXPECT_LT(max_rel_diff(got[i], want[i]), 1e-5) << "output " << i;
}

// Each path and op family: the fault is seen, the family avoided, its fallback right,
// and the backend made afterwards computes the op right.
TEST_F(KernelCheck, EveryInjectedFaultIsAvoided) {
  struct Case {
    std::string fault, path, op;
  };
  const Case cases[] = {{"onednn-matmul", "onednn-matmul", ""},
                        {"onednn-conv", "Conv", "Conv"},
                        {"onednn-conv-grad", "ConvGrad", "ConvGrad"},
                        {"Conv", "Conv", "Conv"},
                        {"MaxPoolGrad", "MaxPoolGrad", "MaxPoolGrad"},
                        {"AveragePoolGrad", "AveragePoolGrad", ""},
                        {"BatchNormalization", "BatchNormalization", ""},
                        {"BatchNormalizationGrad", "BatchNormalizationGrad", ""}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fault);
    exec::cpu::set_injected_faults(c.fault);
    const KernelCheckReport r = exec::run_kernel_check();
    const KernelFamilyCheck* f = family(r, c.path);
    ASSERT_NE(f, nullptr);
    EXPECT_TRUE(f->avoided);
    EXPECT_GT(f->worst, 1.0);
    EXPECT_TRUE(f->fallback_ok()) << f->fallback_worst;
    EXPECT_TRUE(r.trustworthy());
    int avoided = 0;
    for (const auto& g : r.families) avoided += g.avoided;
    EXPECT_EQ(avoided, 1) << "only the faulty family goes";
    if (c.op.empty()) continue;
    // The op through a backend made now: the same as the portable backend's.
    ir::Tensor x = random({2, 8, 8, 8}, 7);
    std::vector<OpInput> inputs;
    std::map<std::string, ir::Attribute> attrs;
    size_t outputs = 1;
    if (c.op == "Conv") {
      inputs = {in(x), in(random({8, 8, 3, 3}, 8))};
      attrs = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
    } else if (c.op == "ConvGrad") {
      inputs = {in(random({2, 8, 8, 8}, 9)), in(x), in(random({8, 8, 3, 3}, 8))};
      attrs = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
      outputs = 3;
    } else {
      inputs = {in(random({2, 8, 4, 4}, 9)), in(x)};
      attrs = {{"kernel_shape", std::vector<int64_t>{2, 2}},
               {"strides", std::vector<int64_t>{2, 2}}};
    }
    auto cpu = exec::make_cpu_backend();
    auto got = run_op(c.op, inputs, attrs, outputs, false, 0, {}, cpu.get());
    auto want =
        run_op(c.op, inputs, attrs, outputs, false, 0, {}, exec::make_portable_backend().get());
    for (size_t i = 0; i < outputs; ++i) EXPECT_LT(max_rel_diff(got[i], want[i]), 1e-5);
  }
}

// Wrong only in the blocked layout: the op computes row-major instead.
TEST_F(KernelCheck, WrongBlockedKernelKeepsTheOpRowMajor) {
  exec::cpu::set_injected_faults("BatchNormalizationGrad:blocked");
  const KernelCheckReport r = exec::run_kernel_check();
  const KernelFamilyCheck* blocked = family(r, "BatchNormalizationGrad:blocked");
  ASSERT_NE(blocked, nullptr);
  if (blocked->skipped) GTEST_SKIP() << "no blocked layout on this CPU";
  EXPECT_TRUE(blocked->avoided);
  EXPECT_EQ(blocked->fallback, "row-major");
  EXPECT_FALSE(family(r, "BatchNormalizationGrad")->avoided);
  EXPECT_EQ(exec::cpu::avoided_ops().blocked.count("BatchNormalizationGrad"), 1u);
}

}  // namespace
}  // namespace pipetrain::test
