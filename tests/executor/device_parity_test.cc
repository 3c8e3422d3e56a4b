// The device backends' shared kernels against the CPU backend: every case of
// the gradient table (forward and backward of every differentiable op) plus
// the non-differentiable ops, run on the portable backend (always: the shared
// code on the host) and on CUDA (when a GPU is present). Ops a device backend
// does not run yet are listed, and the list is checked, so it only shrinks.
#include <cstring>

#include "executor/backend.h"
#include "executor/cpu/kernels/bf16.h"
#include "executor/device/bf16.h"
#include "executor/device/device_support.h"
#include "ir/op_list.h"
#include "tests/autodiff/grad_cases.h"
#include "tests/executor/op_test_util.h"

namespace pipetrain::test {
namespace {

// Compared to a tolerance: the CPU backend convolves with oneDNN, the device
// backends with im2col + GEMM (sums in another order); and LSTMGrad's gate
// math, inlined differently in the two kernels, gets its multiply-adds fused
// differently by the compiler (1-ulp differences); the CPU's Attention runs
// its batched GEMMs on oneDNN's matmul, the devices' on BLAS.
const std::set<std::string> kNotBitwise = {
    "Conv",     "ConvTranspose", "ConvGrad",     "ConvTransposeGrad",
    "LSTMGrad", "Attention",     "AttentionGrad"};

bool same_bits(const ir::Tensor& a, const ir::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Runs every case on `device` and on `reference` (default: the CPU backend);
// returns the ops the device could not run.
std::set<std::string> compare_on(exec::Backend& device, double tolerance,
                                 exec::Backend* reference = nullptr) {
  auto cpu_backend = exec::make_cpu_backend();
  exec::Backend* cpu = reference ? reference : cpu_backend.get();
  std::set<std::string> unsupported;
  int compared = 0;
  for (const GradCase& c : grad_cases::all_cases()) {
    const uint64_t seed = std::hash<std::string>{}(c.name) % 100000;
    CaseGraphs cg = build_case(c, seed);
    bool runs = true, exact = tolerance == 0;
    for (const auto& n : cg.training.nodes) {
      if (!device.unsupported_reason(cg.training, n).empty()) {
        unsupported.insert(n.op_type);
        runs = false;
      }
      if (kNotBitwise.count(n.op_type)) exact = false;
    }
    if (!runs) continue;
    exec::RunOptions opts;
    opts.training = c.training;
    opts.seed = seed;
    auto want = exec::ForwardRunner(cg.training, *cpu).run({}, opts);
    auto got = exec::ForwardRunner(cg.training, device).run({}, opts);
    for (const auto& [name, t] : want) {
      if (exact)
        EXPECT_TRUE(same_bits(got.at(name), t))
            << c.name << ": output " << name << " differs: " << got.at(name).at(0) << " vs "
            << t.at(0);
      else
        EXPECT_LE(closeness(got.at(name), t, std::max(tolerance, 1e-4), std::max(tolerance, 1e-5)),
                  1.0)
            << c.name << ": output " << name;
    }
    ++compared;
  }
  EXPECT_GT(compared, 30);
  return unsupported;
}

TEST(DeviceParity, EveryOpHasADeviceImplementation) {
  std::vector<std::string> missing;
#define PIPETRAIN_CHECK_DEVICE_OP(op) \
  if (!exec::device::device_runs(#op, {"Gemm", "MatMul"})) missing.push_back(#op);
  PIPETRAIN_OPS(PIPETRAIN_CHECK_DEVICE_OP)
#undef PIPETRAIN_CHECK_DEVICE_OP
  EXPECT_TRUE(missing.empty()) << "no device kernel for " << ::testing::PrintToString(missing);
}

TEST(DeviceParity, PortableKernelsGiveTheCpuResultsBitwise) {
  auto portable = exec::make_portable_backend();
  EXPECT_EQ(compare_on(*portable, 0.0), std::set<std::string>{});
}

// Ops and dtypes the gradient table does not reach: integers, booleans,
// comparisons, casts, index tables.
std::vector<std::pair<std::string, std::function<std::vector<ir::Tensor>(exec::Backend*)>>>
forward_cases() {
  using ir::Tensor;
  auto i64 = [](std::vector<int64_t> v, ir::Shape s) { return Tensor::from_i64(v, s); };
  auto f32 = [](std::vector<float> v, ir::Shape s) { return Tensor::from_f32(v, s); };
  auto i32 = [](std::vector<int64_t> v, ir::Shape s) {
    Tensor t(ir::DType::kI32, s);
    for (size_t k = 0; k < v.size(); ++k) t.data<int32_t>()[k] = static_cast<int32_t>(v[k]);
    return t;
  };
  auto boolean = [](std::vector<int> v, ir::Shape s) {
    Tensor t(ir::DType::kBool, s);
    for (size_t k = 0; k < v.size(); ++k) t.data<uint8_t>()[k] = static_cast<uint8_t>(v[k]);
    return t;
  };
  const Tensor a = i64({5, -3, 7, 0, -9, 2}, {2, 3}), b = i64({2, 0, -1}, {3});
  const Tensor x = f32({1.5f, -2.25f, NAN, 0.0f, -0.0f, 3e9f}, {2, 3});
  using ir::Attribute;
  return {
      {"Add i64",
       [=](auto* on) {
         return run_op("Add", {in(a), in(b)}, {}, 1, false, 0, {}, on);
       }},
      {"Div i64 by 0 and -1",
       [=](auto* on) {
         return run_op("Div", {in(a), in(b)}, {}, 1, false, 0, {}, on);
       }},
      {"Pow i32^i64",
       [=](auto* on) {
         return run_op("Pow", {in(i32({2, -3, 4}, {3})), in(i64({3, 2, -1}, {3}))}, {}, 1, false, 0,
                       {}, on);
       }},
      {"Pow f32^i64",
       [=](auto* on) {
         return run_op("Pow", {in(x), in(i64({2}, {1}))}, {}, 1, false, 0, {}, on);
       }},
      {"Equal bool",
       [=](auto* on) {
         return run_op("Equal", {in(boolean({1, 0, 1}, {3})), in(boolean({1}, {1}))}, {}, 1, false,
                       0, {}, on);
       }},
      {"Less f32 NaN",
       [=](auto* on) {
         return run_op("Less", {in(x), in(f32({0.0f}, {1}))}, {}, 1, false, 0, {}, on);
       }},
      {"Greater i32",
       [=](auto* on) {
         return run_op("Greater", {in(i32({1, 5}, {2, 1})), in(i32({3, 0, 9}, {3}))}, {}, 1, false,
                       0, {}, on);
       }},
      {"Max 3 inputs NaN",
       [=](auto* on) {
         return run_op("Max", {in(x), in(f32({1.0f, 2.0f, 3.0f}, {3})), in(f32({-1.0f}, {1}))}, {},
                       1, false, 0, {}, on);
       }},
      {"Min i64",
       [=](auto* on) {
         return run_op("Min", {in(a), in(b)}, {}, 1, false, 0, {}, on);
       }},
      {"Neg i64", [=](auto* on) { return run_op("Neg", {in(a)}, {}, 1, false, 0, {}, on); }},
      {"Abs i32",
       [=](auto* on) {
         return run_op("Abs", {in(i32({-4, 0, 7}, {3}))}, {}, 1, false, 0, {}, on);
       }},
      {"Relu i64", [=](auto* on) { return run_op("Relu", {in(a)}, {}, 1, false, 0, {}, on); }},
      {"Clip i32",
       [=](auto* on) {
         return run_op("Clip", {in(i32({-4, 0, 7}, {3})), in(i32({-1}, {})), in(i32({5}, {}))}, {},
                       1, false, 0, {}, on);
       }},
      {"Mod i64 floor and fmod",
       [=](auto* on) {
         auto floor = run_op("Mod", {in(a), in(b)}, {}, 1, false, 0, {}, on);
         auto trunc =
             run_op("Mod", {in(a), in(b)}, {{"fmod", Attribute(int64_t{1})}}, 1, false, 0, {}, on);
         floor.push_back(trunc[0]);
         return floor;
       }},
      {"Mod f32 NaN",
       [=](auto* on) {
         return run_op("Mod", {in(x), in(f32({-0.75f}, {1}))}, {}, 1, false, 0, {}, on);
       }},
      {"And Or Xor",
       [=](auto* on) {
         const Tensor p = boolean({1, 0, 1, 0}, {2, 2}), q = boolean({1, 0}, {2});
         std::vector<Tensor> out;
         for (const char* op : {"And", "Or", "Xor"})
           out.push_back(run_op(op, {in(p), in(q)}, {}, 1, false, 0, {}, on)[0]);
         return out;
       }},
      {"IsNaN IsInf",
       [=](auto* on) {
         const Tensor v = f32({1.0f, NAN, INFINITY, -INFINITY, 0.0f}, {5});
         auto out = run_op("IsNaN", {in(v)}, {}, 1, false, 0, {}, on);
         out.push_back(run_op("IsInf", {in(v)}, {{"detect_positive", Attribute(int64_t{0})}}, 1,
                              false, 0, {}, on)[0]);
         return out;
       }},
      {"ReduceProd ReduceMin ReduceL1 ReduceSumSquare i64",
       [=](auto* on) {
         std::vector<Tensor> out;
         for (const char* op : {"ReduceProd", "ReduceMin", "ReduceL1", "ReduceSumSquare"})
           out.push_back(run_op(op, {in(a)}, {{"axes", Attribute(std::vector<int64_t>{1})}}, 1,
                                false, 0, {}, on)[0]);
         return out;
       }},
      {"ArgMax ArgMin i64 and f32 NaN, last index",
       [=](auto* on) {
         const Tensor ties = i64({3, 1, 3, 0, 0, -2}, {2, 3});
         std::vector<Tensor> out;
         for (const char* op : {"ArgMax", "ArgMin"})
           for (int64_t last : {0, 1})
             out.push_back(
                 run_op(op, {in(ties)},
                        {{"axis", Attribute(int64_t{1})}, {"select_last_index", Attribute(last)}},
                        1, false, 0, {}, on)[0]);
         out.push_back(
             run_op("ArgMax", {in(x)}, {{"axis", Attribute(int64_t{-1})}}, 1, false, 0, {}, on)[0]);
         out.push_back(run_op("ArgMin", {in(x)}, {{"keepdims", Attribute(int64_t{0})}}, 1, false, 0,
                              {}, on)[0]);
         return out;
       }},
      {"TopK f32 with ties and NaN, largest and smallest, i32",
       [=](auto* on) {
         const Tensor t = f32({2, NAN, 2, -1, 5, 2, 0, 0}, {2, 4});
         std::vector<Tensor> out;
         for (int64_t largest : {0, 1})
           for (Tensor v : run_op("TopK", {in(t), constant(i64({3}, {1}))},
                                  {{"largest", Attribute(largest)}}, 2, false, 0, {}, on))
             out.push_back(v);
         for (Tensor v :
              run_op("TopK", {in(i32({4, 1, 4, 2, 9, 0}, {3, 2})), constant(i64({2}, {1}))},
                     {{"axis", Attribute(int64_t{0})}}, 2, false, 0, {}, on))
           out.push_back(v);
         return out;
       }},
      {"CumSum i32 Trilu bool Tile i64 Size",
       [=](auto* on) {
         auto out = run_op("CumSum", {in(i32({1, 2, 3, 4, 5, 6}, {2, 3})), in(i64({1}, {}))},
                           {{"exclusive", Attribute(int64_t{1})}}, 1, false, 0, {}, on);
         out.push_back(run_op("Trilu", {in(boolean({1, 1, 1, 1, 1, 1}, {2, 3})), in(i64({-1}, {}))},
                              {{"upper", Attribute(int64_t{0})}}, 1, false, 0, {}, on)[0]);
         out.push_back(
             run_op("Tile", {in(a), constant(i64({2, 1}, {2}))}, {}, 1, false, 0, {}, on)[0]);
         out.push_back(run_op("Size", {in(a)}, {}, 1, false, 0, {}, on)[0]);
         return out;
       }},
      {"GatherElements i64 ScatterElements i32 max with repeats",
       [=](auto* on) {
         auto out = run_op("GatherElements", {in(a), in(i64({2, -1, 0}, {1, 3}))},
                           {{"axis", Attribute(int64_t{1})}}, 1, false, 0, {}, on);
         out.push_back(
             run_op("ScatterElements",
                    {in(i32({1, 2, 3, 4, 5, 6}, {2, 3})), in(i64({0, 0, 1, 1}, {2, 2})),
                     in(i32({7, -1, 9, 8}, {2, 2}))},
                    {{"axis", Attribute(int64_t{1})}, {"reduction", Attribute(std::string("max"))}},
                    1, false, 0, {}, on)[0]);
         return out;
       }},
      {"GatherND i64 batch_dims ScatterND i32 mul with repeats",
       [=](auto* on) {
         auto out = run_op("GatherND", {in(a), in(i64({2, 0}, {2, 1}))},
                           {{"batch_dims", Attribute(int64_t{1})}}, 1, false, 0, {}, on);
         out.push_back(run_op("ScatterND",
                              {in(i32({1, 2, 3, 4, 5, 6}, {3, 2})), in(i64({2, 0, 2}, {3, 1})),
                               in(i32({7, -1, 9, 8, 3, 2}, {3, 2}))},
                              {{"reduction", Attribute(std::string("mul"))}}, 1, false, 0, {},
                              on)[0]);
         return out;
       }},
      {"GreaterOrEqual LessOrEqual i64 CastLike Hardmax EyeLike OneHot",
       [=](auto* on) {
         auto out = run_op("GreaterOrEqual", {in(a), in(b)}, {}, 1, false, 0, {}, on);
         out.push_back(run_op("LessOrEqual", {in(a), in(b)}, {}, 1, false, 0, {}, on)[0]);
         out.push_back(run_op("CastLike", {in(a), in(x)}, {}, 1, false, 0, {}, on)[0]);
         out.push_back(run_op("Hardmax", {in(f32({1, 3, 3, NAN, 0, 2}, {2, 3}))},
                              {{"axis", Attribute(int64_t{0})}}, 1, false, 0, {}, on)[0]);
         out.push_back(
             run_op("EyeLike", {in(a)}, {{"k", Attribute(int64_t{1})}}, 1, false, 0, {}, on)[0]);
         out.push_back(
             run_op("OneHot",
                    {in(i64({0, -1, 2, 5}, {2, 2})), constant(i64({3}, {})), in(f32({-1, 4}, {2}))},
                    {{"axis", Attribute(int64_t{1})}}, 1, false, 0, {}, on)[0]);
         return out;
       }},
      {"Sum i64",
       [=](auto* on) {
         return run_op("Sum", {in(a), in(b), in(b)}, {}, 1, false, 0, {}, on);
       }},
      {"Not",
       [=](auto* on) {
         return run_op("Not", {in(boolean({1, 0, 0}, {3}))}, {}, 1, false, 0, {}, on);
       }},
      {"Cast f32->i32",
       [=](auto* on) {
         return run_op("Cast", {in(x)}, {{"to", Attribute(int64_t{6})}}, 1, false, 0, {}, on);
       }},
      {"Cast i64->bool",
       [=](auto* on) {
         return run_op("Cast", {in(a)}, {{"to", Attribute(int64_t{9})}}, 1, false, 0, {}, on);
       }},
      {"Cast bool->f32",
       [=](auto* on) {
         return run_op("Cast", {in(boolean({1, 0}, {2}))}, {{"to", Attribute(int64_t{1})}}, 1,
                       false, 0, {}, on);
       }},
      {"Where i64",
       [=](auto* on) {
         return run_op("Where", {in(boolean({1, 0, 1}, {3})), in(a), in(i64({-1}, {1}))}, {}, 1,
                       false, 0, {}, on);
       }},
      {"Gather i64 negative",
       [=](auto* on) {
         return run_op("Gather", {in(a), constant(i64({-1, 0, 2, 2}, {2, 2}))},
                       {{"axis", Attribute(int64_t{1})}}, 1, false, 0, {}, on);
       }},
      {"Slice negative step",
       [=](auto* on) {
         return run_op("Slice",
                       {in(a), constant(i64({-1}, {1})), constant(i64({-10}, {1})),
                        constant(i64({1}, {1})), constant(i64({-2}, {1}))},
                       {}, 1, false, 0, {}, on);
       }},
      {"Pad reflect",
       [=](auto* on) {
         return run_op("Pad", {in(x), constant(i64({0, 2, 1, 1}, {4}))},
                       {{"mode", Attribute(std::string("reflect"))}}, 1, false, 0, {}, on);
       }},
      {"Pad constant i64",
       [=](auto* on) {
         return run_op("Pad", {in(a), constant(i64({1, 0, 0, 2}, {4})), constant(i64({7}, {}))}, {},
                       1, false, 0, {}, on);
       }},
      {"Transpose i64",
       [=](auto* on) { return run_op("Transpose", {in(a)}, {}, 1, false, 0, {}, on); }},
      {"Expand bool",
       [=](auto* on) {
         return run_op("Expand", {in(boolean({1, 0}, {2, 1})), constant(i64({2, 3}, {2}))}, {}, 1,
                       false, 0, {}, on);
       }},
      {"Range i64",
       [=](auto* on) {
         return run_op("Range",
                       {constant(i64({5}, {})), constant(i64({-4}, {})), constant(i64({-3}, {}))},
                       {}, 1, false, 0, {}, on);
       }},
      {"Shape", [=](auto* on) { return run_op("Shape", {in(a)}, {}, 1, false, 0, {}, on); }},
      {"MaxPool indices column-major",
       [=](auto* on) {
         ir::Tensor img(ir::DType::kF32, {1, 2, 5, 4});
         for (int64_t k = 0; k < img.numel(); ++k)
           img.data<float>()[k] = static_cast<float>((k * 7) % 11) - 5.0f;
         return run_op("MaxPool", {in(img)},
                       {{"kernel_shape", Attribute(std::vector<int64_t>{3, 2})},
                        {"strides", Attribute(std::vector<int64_t>{2, 1})},
                        {"pads", Attribute(std::vector<int64_t>{1, 0, 1, 1})},
                        {"storage_order", Attribute(int64_t{1})}},
                       2, false, 0, {}, on);
       }},
      {"AveragePool count_include_pad ceil",
       [=](auto* on) {
         ir::Tensor img(ir::DType::kF32, {2, 1, 5, 5});
         for (int64_t k = 0; k < img.numel(); ++k)
           img.data<float>()[k] = 0.25f * static_cast<float>((k * 5) % 13);
         return run_op("AveragePool", {in(img)},
                       {{"kernel_shape", Attribute(std::vector<int64_t>{3, 3})},
                        {"strides", Attribute(std::vector<int64_t>{2, 2})},
                        {"pads", Attribute(std::vector<int64_t>{1, 1, 1, 1})},
                        {"count_include_pad", Attribute(int64_t{1})},
                        {"ceil_mode", Attribute(int64_t{1})}},
                       1, false, 0, {}, on);
       }},
      {"Dropout training",
       [=](auto* on) {
         return run_op("Dropout", {in(x), constant(f32({0.5f}, {})), constant(boolean({1}, {}))},
                       {}, 2, false, 42, {}, on);
       }},
  };
}

TEST(DeviceParity, PortableRunsIntegersBooleansAndIndexTablesBitwise) {
  auto portable = exec::make_portable_backend();
  for (const auto& [name, run] : forward_cases()) {
    const auto want = run(nullptr);
    const auto got = run(portable.get());
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_TRUE(same_bits(got[k], want[k])) << name << ": output " << k;
  }
}

TEST(DeviceParity, CudaKernelsMatchTheCpu) {
  if (exec::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto cuda = exec::make_cuda_backend(0);
  EXPECT_EQ(compare_on(*cuda, 1e-4), std::set<std::string>{});
  for (const auto& [name, run] : forward_cases()) {
    const auto want = run(nullptr);
    const auto got = run(cuda.get());
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_LE(closeness(got[k], want[k], 1e-5, 1e-6), 1.0) << name << ": output " << k;
  }
}

TEST(DeviceBf16, CudaBf16MatchesPortableBf16) {
  if (exec::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto cuda = exec::make_cuda_backend(0, exec::Precision::kBf16);
  auto portable = exec::make_portable_backend(exec::Precision::kBf16);
  EXPECT_EQ(compare_on(*cuda, 1e-2, portable.get()), std::set<std::string>{});
}

// The CPU backend's bf16 (oneDNN's bf16 kernels) on every case of the
// gradient table, against the rule as the portable backend applies it.
TEST(DeviceBf16, CpuBf16MatchesPortableBf16) {
  if (!exec::cpu::native_bf16()) GTEST_SKIP() << "no bf16 arithmetic on this CPU";
  exec::CpuBackendOptions o;
  o.precision = exec::Precision::kBf16;
  auto cpu = exec::make_cpu_backend(o);
  auto portable = exec::make_portable_backend(exec::Precision::kBf16);
  EXPECT_EQ(compare_on(*cpu, 1e-2, portable.get()), std::set<std::string>{});
}

TEST(DeviceBf16, RoundingIsTheBf16ConversionsRoundTrip) {
  const float specials[] = {0.0f,      -0.0f,  1.0f,    1.00390625f, 1.005859375f, 3.14159265f,
                            -2.5e-38f, 1e-45f, 3.4e38f, INFINITY,    -INFINITY,    NAN};
  for (float v : specials) {
    const float want = ir::bf16_to_f32(ir::f32_to_bf16(v));
    const float got = exec::device::round_bf16(v);
    if (std::isnan(v))
      EXPECT_TRUE(std::isnan(got));
    else
      EXPECT_EQ(std::memcmp(&got, &want, 4), 0) << v;
  }
  for (uint32_t b = 0; b < 0xffffffffu - 9973u * 65536u; b += 9973u * 65536u + 7u) {
    float v;
    std::memcpy(&v, &b, 4);
    if (std::isnan(v)) continue;
    const float want = ir::bf16_to_f32(ir::f32_to_bf16(v)), got = exec::device::round_bf16(v);
    EXPECT_EQ(std::memcmp(&got, &want, 4), 0) << b;
  }
}

// A bf16 op equals the fp32 op on bf16-rounded inputs, its output rounded:
// fp32 accumulation, bf16 in and out; the inputs themselves are untouched.
TEST(DeviceBf16, GemmAndMatMulRoundInputsAndOutputsOnly) {
  auto bf16 = exec::make_portable_backend(exec::Precision::kBf16);
  auto rounded = [](ir::Tensor t) {
    t = t.clone();
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = exec::device::round_bf16(t.data<float>()[i]);
    return t;
  };
  ir::Tensor a(ir::DType::kF32, {5, 7}), b(ir::DType::kF32, {7, 3}), c(ir::DType::kF32, {3});
  for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = 0.1f * static_cast<float>(i) - 1.3f;
  for (int64_t i = 0; i < b.numel(); ++i)
    b.data<float>()[i] = 0.37f * static_cast<float>(i % 5) - 0.51f;
  for (int64_t i = 0; i < c.numel(); ++i)
    c.data<float>()[i] = 0.013f * static_cast<float>(i) + 0.3f;
  const ir::Tensor a0 = a.clone();
  for (const std::string op : {"Gemm", "MatMul"}) {
    std::vector<OpInput> ins = {in(a), in(b)}, want_ins = {in(rounded(a)), in(rounded(b))};
    if (op == "Gemm") {
      ins.push_back(in(c));
      want_ins.push_back(in(rounded(c)));
    }
    const ir::Tensor got = run_op(op, ins, {}, 1, false, 0, {}, bf16.get())[0];
    const ir::Tensor want = rounded(run_op(op, want_ins)[0]);
    EXPECT_TRUE(same_bits(got, want)) << op;
    EXPECT_FALSE(same_bits(got, run_op(op, ins)[0])) << op << ": bf16 changed nothing";
  }
  EXPECT_TRUE(same_bits(a, a0)) << "the input (a master weight, say) was rounded in place";
}

}  // namespace
}  // namespace pipetrain::test
