#include "data/batch_loader.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "data/random.h"
#include "ir/error.h"

namespace pipetrain::data {
namespace {

// Sample i has features (i, -i) and label i % 3.
Dataset numbered(int64_t n) {
  Dataset ds;
  ds.name = "numbered";
  ds.features = ir::Tensor(ir::DType::kF32, {n, 2});
  ds.labels = ir::Tensor(ir::DType::kI64, {n});
  for (int64_t i = 0; i < n; ++i) {
    ds.features.data<float>()[2 * i] = static_cast<float>(i);
    ds.features.data<float>()[2 * i + 1] = static_cast<float>(-i);
    ds.labels.data<int64_t>()[i] = i % 3;
  }
  ds.num_classes = 3;
  return ds;
}

TEST(Random, PermutationIsFixedBySeed) {
  // Fisher-Yates over std::mt19937_64(7): fixed by the standard's engine, not the library.
  std::vector<int64_t> p = permutation(10, 7);
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(p, permutation(10, 7));
  EXPECT_NE(p, permutation(10, 8));
  // The 10000th output of a default-constructed mt19937_64 is fixed by the standard.
  std::mt19937_64 rng;
  rng.discard(9999);
  EXPECT_EQ(rng(), 9981545732273789042ull);
}

TEST(BatchLoader, EveryEpochCoversEverySampleOnceWithAPartialLastBatch) {
  LoaderOptions o;
  o.batch_size = 4;
  o.seed = 11;
  BatchLoader loader(numbered(10), o);
  EXPECT_EQ(loader.batches_per_epoch(), 3);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::multiset<int64_t> seen;
    std::vector<int64_t> order;
    int64_t batches = 0;
    while (auto b = loader.next()) {
      EXPECT_EQ(b->epoch, epoch);
      EXPECT_EQ(b->index, batches++);
      const int64_t m = b->features.shape()[0];
      EXPECT_EQ(m, b->index < 2 ? 4 : 2);
      EXPECT_EQ(b->labels.shape(), (ir::Shape{m}));
      for (int64_t i = 0; i < m; ++i) {
        const int64_t s = b->indices[i];
        EXPECT_EQ(b->features.data<float>()[2 * i], static_cast<float>(s));
        EXPECT_EQ(b->features.data<float>()[2 * i + 1], static_cast<float>(-s));
        EXPECT_EQ(b->labels.data<int64_t>()[i], s % 3);
        seen.insert(s);
        order.push_back(s);
      }
    }
    EXPECT_EQ(batches, 3);
    EXPECT_EQ(seen, (std::multiset<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
    EXPECT_EQ(order, permutation(10, 11 + epoch)) << "epoch " << epoch << " uses seed + epoch";
  }
}

TEST(BatchLoader, SameSeedSameBatchesBitwise) {
  LoaderOptions o;
  o.batch_size = 3;
  o.seed = 5;
  o.drop_last = true;
  Dataset ds = numbered(11);
  BatchLoader a(ds, o), b(ds, o);
  EXPECT_EQ(a.batches_per_epoch(), 3);
  for (int step = 0; step < 12; ++step) {
    auto x = a.next(), y = b.next();
    ASSERT_EQ(x.has_value(), y.has_value());
    if (!x) continue;
    EXPECT_EQ(x->features.shape()[0], 3);
    EXPECT_EQ(std::memcmp(x->features.raw(), y->features.raw(), x->features.nbytes()), 0);
    EXPECT_EQ(std::memcmp(x->labels.raw(), y->labels.raw(), x->labels.nbytes()), 0);
  }
}

TEST(BatchLoader, ResumesAtEpochAndBatchAndKeepsOrderWithoutShuffle) {
  LoaderOptions o;
  o.batch_size = 4;
  o.seed = 2;
  o.first_epoch = 3;
  o.first_batch = 1;
  BatchLoader loader(numbered(10), o);
  auto b = loader.next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->epoch, 3);
  EXPECT_EQ(b->index, 1);
  std::vector<int64_t> expect = permutation(10, 5);
  EXPECT_EQ(b->indices, std::vector<int64_t>(expect.begin() + 4, expect.begin() + 8));

  LoaderOptions plain;
  plain.batch_size = 6;
  plain.shuffle = false;
  BatchLoader in_order(numbered(10), plain);
  EXPECT_EQ(in_order.next()->indices, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(in_order.next()->indices, (std::vector<int64_t>{6, 7, 8, 9}));
  EXPECT_FALSE(in_order.next().has_value());
}

TEST(BatchLoader, DestructorStopsAFullQueueMidEpoch) {
  LoaderOptions o;
  o.batch_size = 1;
  o.prefetch = 2;
  for (int i = 0; i < 20; ++i) {
    BatchLoader loader(numbered(1000), o);
    loader.next();
    if (i % 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // let the queue fill
  }  // each destructor must return promptly with the worker blocked on a full queue
}

TEST(BatchLoader, WorkerExceptionsReachNext) {
  LoaderOptions o;
  o.batch_size = 2;
  int calls = 0;
  BatchLoader loader(numbered(10), o, [&calls](Batch& b) {
    if (++calls == 2) throw RuntimeFault("augmentation failed on batch " + std::to_string(b.index));
    b.features.data<float>()[0] = 42.0f;
  });
  EXPECT_EQ(loader.next()->features.data<float>()[0], 42.0f);
  for (int i = 0; i < 2; ++i) {
    try {
      loader.next();
      FAIL() << "no exception";
    } catch (const RuntimeFault& e) {
      EXPECT_STREQ(e.what(), "augmentation failed on batch 1");
    }
  }
}

TEST(BatchLoader, BadOptions) {
  LoaderOptions o;
  o.batch_size = 0;
  EXPECT_THROW(BatchLoader(numbered(4), o), ModelError);
  o.batch_size = 5;
  o.drop_last = true;
  try {
    BatchLoader loader(numbered(4), o);
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("leaves no batch"), std::string::npos);
  }
  EXPECT_THROW(BatchLoader(Dataset{}, LoaderOptions{}), ModelError);
}

}  // namespace
}  // namespace pipetrain::data
