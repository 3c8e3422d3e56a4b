// Device residency's bookkeeping (executor/device/residency.h) on a memory
// that counts what moves: within a run, produced tensors stay on the device,
// only feeds and values go up and only what the host asks for comes back;
// values stay cached while a nonzero values_version holds; stale host copies
// are poisoned until they come back.
#include "executor/device/residency.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "ir/error.h"

namespace pipetrain::exec::device {
namespace {

class CountingMemory final : public DeviceMemory {
 public:
  void* allocate(size_t bytes) override {
    ++live;
    return std::malloc(bytes);
  }
  void release(void* p, size_t) override {
    --live;
    std::free(p);
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    ++uploads;
    std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, size_t bytes) override {
    ++downloads;
    std::memcpy(dst, src, bytes);
  }
  void zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  int live = 0, uploads = 0, downloads = 0;
};

ir::Tensor floats(std::vector<float> v) {
  const auto n = static_cast<int64_t>(v.size());
  return ir::Tensor::from_f32(std::move(v), {n});
}

TEST(Residency, ProducedTensorsStayOnTheDeviceWithinARun) {
  CountingMemory mem;
  Residency r(mem);
  ir::Tensor feed = floats({1, 2, 3}), weight = floats({0.5f, 0.5f, 0.5f});
  ir::Tensor h = floats({0, 0, 0}), y = floats({0, 0, 0});
  r.begin_run(7);
  // Node 1: h = feed * weight, on the "device".
  auto* fd = static_cast<const float*>(r.input(feed, false));
  auto* wd = static_cast<const float*>(r.input(weight, true));
  auto* hd = static_cast<float*>(r.output(h));
  for (int i = 0; i < 3; ++i) hd[i] = fd[i] * wd[i];
  // Node 2 reads h: no upload, the device copy itself.
  EXPECT_EQ(r.input(h, false), hd);
  auto* yd = static_cast<float*>(r.output(y));
  for (int i = 0; i < 3; ++i) yd[i] = hd[i] + 1;
  EXPECT_EQ(mem.uploads, 2);  // feed and weight only
  r.release(h);
  r.to_host(y);
  EXPECT_EQ(mem.downloads, 1);  // y only: h never came back
  EXPECT_FLOAT_EQ(y.data<float>()[2], 2.5f);
  r.to_host(y);  // current already: no second download
  EXPECT_EQ(mem.downloads, 1);
  r.end_run();
  EXPECT_EQ(mem.live, 1);  // the cached weight

  // The same version: the weight is not uploaded again; a new one drops it.
  r.begin_run(7);
  EXPECT_NE(r.input(weight, true), nullptr);
  EXPECT_EQ(mem.uploads, 2);
  r.end_run();
  r.begin_run(8);
  r.input(weight, true);
  EXPECT_EQ(mem.uploads, 3);
  r.end_run();
  // Version 0 promises nothing: nothing stays.
  r.begin_run(0);
  r.input(weight, true);
  r.end_run();
  EXPECT_EQ(mem.live, 0);
}

TEST(Residency, StaleHostCopiesArePoisonedUntilTheyComeBack) {
  CountingMemory mem;
  Residency r(mem, /*poison_stale=*/true);
  ir::Tensor y = floats({1, 2});
  r.begin_run(0);
  auto* yd = static_cast<float*>(r.output(y));
  EXPECT_EQ(yd[0], 0.0f);  // zeroed on the device
  EXPECT_TRUE(std::isnan(y.data<float>()[0]));
  yd[0] = 4;
  r.to_host(y);
  EXPECT_EQ(y.data<float>()[0], 4.0f);
  r.end_run();
}

TEST(Residency, AHostWriteReplacesTheDeviceCopy) {
  CountingMemory mem;
  Residency r(mem);
  ir::Tensor t = floats({1, 2});
  r.begin_run(0);
  auto* d = static_cast<float*>(r.output(t));
  d[0] = 9;
  r.host_wrote(t);  // a host op wrote t: the device's 9 is out of date
  t.data<float>()[0] = 5;
  EXPECT_EQ(static_cast<const float*>(r.input(t, false))[0], 5.0f);
  EXPECT_EQ(mem.uploads, 1);
  r.end_run();
  EXPECT_EQ(mem.live, 0);
}

TEST(Residency, AnotherSizeAtTheAddressOfANewerDeviceTensorIsAnError) {
  CountingMemory mem;
  Residency r(mem);
  const auto base = ir::Tensor::allocate(16);
  ir::Tensor whole = ir::Tensor::view(base, 0, ir::DType::kF32, {4});
  ir::Tensor half = ir::Tensor::view(base, 0, ir::DType::kF32, {2});
  r.begin_run(0);
  r.output(whole);
  EXPECT_EQ(r.input(whole.reshaped({2, 2}), false), r.input(whole, false));  // same bytes
  EXPECT_THROW(r.input(half, false), RuntimeFault);
  EXPECT_THROW(r.to_host(half), RuntimeFault);
  r.end_run();
  EXPECT_EQ(mem.live, 0);
}

TEST(Residency, RunsDoNotNest) {
  CountingMemory mem;
  Residency r(mem);
  r.begin_run(1);
  EXPECT_THROW(r.begin_run(1), RuntimeFault);
  r.end_run();
  EXPECT_FALSE(r.active());
}

}  // namespace
}  // namespace pipetrain::exec::device
