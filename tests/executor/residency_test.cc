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
#include <random>
#include <set>

#include "autodiff/training_graph.h"
#include "executor/backend.h"
#include "executor/device/block_cache.h"
#include "executor/forward_runner.h"
#include "executor/trainer.h"
#include "importer/importer.h"
#include "ir/error.h"
#include "models/zoo.h"

namespace pipetrain::exec::device {
namespace {

class CountingMemory final : public DeviceMemory {
 public:
  void* allocate(size_t bytes) override {
    ++live;
    ++allocations;
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
  size_t device_allocations() const override { return static_cast<size_t>(allocations); }
  int live = 0, allocations = 0, uploads = 0, downloads = 0;
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

// A stage's stash: its forward run's output stays on the device under the
// handle keep() returns, across runs and a values_version change, read
// without an upload and brought back only when asked; it goes with the
// handle's buffer.
TEST(Residency, AKeptTensorOutlivesItsRunOnTheDeviceUntilItsHandleGoes) {
  CountingMemory mem;
  Residency r(mem, /*poison_stale=*/true);
  ir::Tensor slot = floats({0, 0, 0});  // an arena slot the next run reuses
  r.begin_run(1);
  auto* d = static_cast<float*>(r.output(slot));
  for (int i = 0; i < 3; ++i) d[i] = static_cast<float>(i) + 0.5f;
  ir::Tensor kept = r.keep(slot);
  EXPECT_NE(kept.raw(), slot.raw());
  EXPECT_TRUE(std::isnan(kept.data<float>()[1]));  // not on the host
  EXPECT_EQ(r.input(kept, false), d);              // the same device buffer, moved
  r.end_run();
  EXPECT_EQ(mem.live, 1);
  EXPECT_EQ(r.kept_count(), 1u);

  r.begin_run(2);  // another values_version: the kept tensor stays all the same
  auto* back = static_cast<const float*>(r.input(kept, false));
  EXPECT_EQ(back, d);
  EXPECT_EQ(back[2], 2.5f);
  EXPECT_EQ(mem.uploads, 0);
  r.release(kept);  // a run's last reader: a later run (the weight half) may read it again
  r.output(slot);   // the slot's next tensor is its own
  r.end_run();
  EXPECT_EQ(mem.live, 1);
  r.to_host(kept);
  EXPECT_EQ(mem.downloads, 1);
  EXPECT_EQ(kept.data<float>()[2], 2.5f);

  kept = ir::Tensor();  // the stash entry goes: so does its device copy, at the next run
  r.begin_run(2);
  r.end_run();
  EXPECT_EQ(mem.live, 0);
  EXPECT_EQ(r.kept_count(), 0u);
}

TEST(Residency, KeepingAHostCurrentTensorCopiesItOnTheHost) {
  CountingMemory mem;
  Residency r(mem, /*poison_stale=*/true);
  ir::Tensor feed = floats({3, 4});
  r.begin_run(0);
  r.input(feed, false);  // uploaded, the host copy current
  ir::Tensor kept = r.keep(feed);
  r.end_run();
  EXPECT_NE(kept.raw(), feed.raw());
  EXPECT_EQ(kept.data<float>()[1], 4.0f);
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

// The cache both device backends allocate through: a released block serves the
// next request of its size class, and only misses reach the device.
TEST(BlockCache, ReleasedBlocksServeTheirSizeClassAgain) {
  int raw = 0, freed = 0;
  BlockCache cache(
      [&](size_t bytes) {
        ++raw;
        return std::malloc(bytes);
      },
      [&](void* p) {
        ++freed;
        std::free(p);
      });
  void* a = cache.allocate(100);
  void* b = cache.allocate(3 << 20);
  EXPECT_EQ(cache.device_allocations(), 2u);
  cache.release(a, 100);
  cache.release(b, 3 << 20);
  EXPECT_EQ(cache.allocate(400), a);            // 100 and 400 bytes: one 512-byte class
  EXPECT_EQ(cache.allocate((3 << 20) + 5), b);  // both 4 MiB
  EXPECT_EQ(cache.device_allocations(), 2u);
  void* c = cache.allocate(600);  // the 1 KiB class: a new block
  EXPECT_NE(c, a);
  EXPECT_EQ(raw, 3);
  EXPECT_EQ(BlockCache::size_class(0), 512u);
  EXPECT_EQ(BlockCache::size_class((1 << 20) + 1), size_t(2) << 20);
  cache.release(a, 400);
  cache.release(b, (3 << 20) + 5);
  cache.release(c, 600);
  cache.empty_cache();
  EXPECT_EQ(freed, 3);
  EXPECT_EQ(cache.cached_bytes(), 0u);
}

// Out of memory, the cache gives its free blocks back and tries once more; a
// second failure names the size.
TEST(BlockCache, OutOfMemoryEmptiesTheCacheOnceThenFails) {
  size_t free_bytes = 1536;  // a device of 1.5 KiB
  std::map<void*, size_t> blocks;
  BlockCache cache(
      [&](size_t bytes) -> void* {
        if (bytes > free_bytes) return nullptr;
        free_bytes -= bytes;
        void* p = std::malloc(bytes);
        blocks[p] = bytes;
        return p;
      },
      [&](void* p) {
        free_bytes += blocks.at(p);
        blocks.erase(p);
        std::free(p);
      });
  void* a = cache.allocate(512);
  void* b = cache.allocate(512);
  cache.release(a, 512);
  void* c = cache.allocate(1000);  // 1 KiB fits only once the cached block is freed
  EXPECT_EQ(cache.cached_bytes(), 0u);
  EXPECT_EQ(free_bytes, 0u);
  try {
    cache.allocate(512);
    FAIL() << "a full device allocated";
  } catch (const RuntimeFault& e) {
    EXPECT_NE(std::string(e.what()).find("out of device memory"), std::string::npos) << e.what();
  }
  cache.release(b, 512);
  cache.release(c, 1000);
}

}  // namespace
}  // namespace pipetrain::exec::device

namespace pipetrain::exec {
namespace {

ir::Node node(std::string name, std::string op, std::vector<std::string> in,
              std::vector<std::string> out) {
  return {std::move(name), std::move(op), std::move(in), std::move(out), {}};
}

// The portable backend in a real run: y = Sigmoid(Relu(x) * w) + b moves x,
// w and b up and y back, nothing of the intermediates; a second run of the
// same values_version moves x only; the result equals the CPU backend's.
TEST(Residency, APortableRunMovesFeedsValuesAndOutputsOnly) {
  ir::Graph g;
  g.set_tensor({"x", ir::DType::kF32, {4, 8}, ir::Role::kInput});
  g.inputs = {"x"};
  g.set_value("w", ir::Tensor::from_f32(std::vector<float>(32, 0.5f), {4, 8}), ir::Role::kParam);
  g.set_value("b", ir::Tensor::from_f32(std::vector<float>(8, -0.25f), {8}), ir::Role::kParam);
  g.nodes = {node("relu", "Relu", {"x"}, {"r"}), node("mul", "Mul", {"r", "w"}, {"m"}),
             node("sig", "Sigmoid", {"m"}, {"s"}), node("add", "Add", {"s", "b"}, {"y"})};
  g.outputs = {"y"};
  g.set_layers({{"l0", {0, 1, 2, 3}}});
  g.infer_shapes();
  g.verify();
  std::vector<float> xs(32);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i) * 0.1f - 1.5f;
  const std::map<std::string, ir::Tensor> feeds = {{"x", ir::Tensor::from_f32(xs, {4, 8})}};

  auto portable = make_portable_backend();
  auto cpu = make_cpu_backend();
  RunOptions opts;
  opts.values_version = fresh_values_version();
  const ir::Tensor want = ForwardRunner(g, *cpu, true).run(feeds, opts).at("y");
  ForwardRunner runner(g, *portable, true);
  const ir::Tensor got = runner.run(feeds, opts).at("y");
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0);
  const size_t x = 32 * 4, w = 32 * 4, b = 8 * 4, y = 32 * 4;
  EXPECT_EQ(portable->transfers().to_device, x + w + b);
  EXPECT_EQ(portable->transfers().to_host, y);
  runner.run(feeds, opts);
  EXPECT_EQ(portable->transfers().to_device, x + w + b + x);  // the values stayed
  EXPECT_EQ(portable->transfers().to_host, 2 * y);

  // A stage's forward and backward: the forward keeps its output m on the
  // device for a second graph (z = Relu(m)), which reads it with no upload.
  g.outputs = {"y", "m"};
  ir::Graph g2;
  g2.set_tensor({"m", ir::DType::kF32, {4, 8}, ir::Role::kInput});
  g2.inputs = {"m"};
  g2.nodes = {node("relu2", "Relu", {"m"}, {"z"})};
  g2.outputs = {"z"};
  g2.set_layers({{"l0", {0}}});
  g2.infer_shapes();
  g2.verify();
  const std::set<std::string> keep = {"m"};
  RunOptions keeping = opts;
  keeping.keep_on_device = &keep;
  const auto cpu_out = ForwardRunner(g, *cpu, true).run(feeds, keeping);
  const ir::Tensor want_z =
      ForwardRunner(g2, *cpu, true).run({{"m", cpu_out.at("m")}}, opts).at("z");
  ForwardRunner first(g, *portable, true), second(g2, *portable, true);
  const auto before = portable->transfers();
  const auto out = first.run(feeds, keeping);
  EXPECT_EQ(portable->transfers().to_host - before.to_host, y);  // y only, not m
  EXPECT_TRUE(std::isnan(out.at("m").data<float>()[0]));         // m is on the device
  const ir::Tensor z = second.run({{"m", out.at("m")}}, opts).at("z");
  EXPECT_EQ(portable->transfers().to_device - before.to_device, x);  // m was not uploaded
  EXPECT_EQ(std::memcmp(z.raw(), want_z.raw(), want_z.nbytes()), 0);
}

// The ledger a training step keeps on the portable backend, whose residency and
// block cache are the CUDA backend's: from the third step on, LeNet's steps take
// no block from the device (the cache serves them all), and each moves and waits
// the same as the one before (nothing grows with the step count).
TEST(DeviceLedger, LenetStepsAllocateNothingOnTheDeviceAfterTheSecond) {
  models::ZooOptions opts;
  opts.batch = 8;
  opts.seed = 5;
  const onnx::ModelProto proto = models::build_zoo_model("lenet", opts);
  ir::Graph model = importer::import_model_bytes(proto.SerializeAsString(), ".", {});
  autodiff::TrainingGraph tg = autodiff::build_training_graph(model, {"cross-entropy", ""});
  const ir::TensorDesc& x = tg.graph.tensor(tg.graph.inputs[0]);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  ir::Tensor images(ir::DType::kF32, x.shape);
  for (int64_t k = 0; k < images.numel(); ++k) images.data<float>()[k] = normal(rng);
  std::vector<int64_t> y(static_cast<size_t>(x.shape[0]));
  for (auto& v : y) v = static_cast<int64_t>(rng() % 10);
  const std::map<std::string, ir::Tensor> feeds = {
      {x.name, images}, {tg.labels, ir::Tensor::from_i64(y, {x.shape[0]})}};

  auto portable = make_portable_backend();
  TrainerOptions to;
  to.optimizer.kind = "sgd";
  to.optimizer.lr = 0.01;
  to.optimizer.momentum = 0.9;
  Trainer trainer(tg, *portable, to);
  std::vector<TransferStats> per_step;
  for (int s = 0; s < 4; ++s) {
    const TransferStats before = portable->transfers();
    trainer.step(feeds);
    per_step.push_back(portable->transfers() - before);
  }
  EXPECT_GT(per_step[0].device_allocations, 0u);
  for (int s = 2; s < 4; ++s) {
    const TransferStats& st = per_step[static_cast<size_t>(s)];
    EXPECT_EQ(st.device_allocations, 0u) << "step " << s;
    EXPECT_GE(st.to_device, images.nbytes() + y.size() * sizeof(int64_t)) << "step " << s;
    EXPECT_GT(st.host_syncs, 0u) << "step " << s;  // the loss and gradients come back
    EXPECT_EQ(st.to_device, per_step[1].to_device) << "step " << s;
    EXPECT_EQ(st.to_host, per_step[1].to_host) << "step " << s;
    EXPECT_EQ(st.host_syncs, per_step[1].host_syncs) << "step " << s;
  }
}

}  // namespace
}  // namespace pipetrain::exec
