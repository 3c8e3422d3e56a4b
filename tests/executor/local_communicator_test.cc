// The local communicator: tag matching, backpressure, deterministic
// allreduce, abort, timeouts and shutdown, with one thread per rank.

#include "executor/comm/local_communicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "ir/error.h"

namespace pipetrain::exec {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ir::DType;
using ir::Tensor;

MessageTag fwd(const std::string& name, int64_t mb) {
  return {name, mb, MessageTag::kForward};
}
MessageTag bwd(const std::string& name, int64_t mb) {
  return {name, mb, MessageTag::kBackward};
}

// Runs fn(rank) on one thread per rank and rethrows the first failure.
template <typename Fn>
void run_ranks(int n, Fn fn) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

TEST(LocalCommunicator, TagsOrderAndRanks) {
  MessageTag a = fwd("x", 1), b = fwd("x", 2), c = bwd("x", 1);
  EXPECT_LT(a, b);
  EXPECT_LT(a, c);
  EXPECT_EQ(a, fwd("x", 1));
  EXPECT_EQ(c.to_string(), "bwd 'x' mb 1");
  auto comms = make_local_communicators(3, 1 << 20);
  ASSERT_EQ(comms.size(), 3u);
  EXPECT_EQ(comms[2]->rank(), 2);
  EXPECT_EQ(comms[2]->size(), 3);
  EXPECT_THROW(comms[0]->send(3, a, Tensor::scalar_f32(1)), RuntimeFault);
  EXPECT_THROW(make_local_communicators(0, 16), PlanError);
}

TEST(LocalCommunicator, OutOfOrderTagsMatchExactly) {
  auto comms = make_local_communicators(2, 1 << 20);
  comms[0]->send(1, fwd("act", 0), Tensor::scalar_f32(10));
  comms[0]->send(1, fwd("act", 1), Tensor::scalar_f32(11));
  comms[0]->send(1, bwd("act", 0), Tensor::scalar_f32(20));
  comms[0]->send(1, fwd("other", 0), Tensor::scalar_f32(30));
  // Received in the reverse order of sending.
  EXPECT_EQ(comms[1]->recv(0, fwd("other", 0)).at(0), 30);
  EXPECT_EQ(comms[1]->recv(0, bwd("act", 0)).at(0), 20);
  EXPECT_EQ(comms[1]->recv(0, fwd("act", 1)).at(0), 11);
  EXPECT_EQ(comms[1]->recv(0, fwd("act", 0)).at(0), 10);
}

TEST(LocalCommunicator, PassesHandleWithoutCopy) {
  auto comms = make_local_communicators(2, 1 << 20);
  Tensor t = Tensor::from_f32({1, 2, 3}, {3});
  comms[0]->send(1, fwd("x", 0), t);
  Tensor got = comms[1]->recv(0, fwd("x", 0));
  EXPECT_EQ(got.raw(), t.raw());
  EXPECT_EQ(got.shape(), (ir::Shape{3}));
}

TEST(LocalCommunicator, RingPingPongOverFourRanks) {
  // Rank 0 injects microbatch mb with value mb; each hop adds 1, forward then
  // backward around the ring: rank 0 gets mb + 3 forward and mb + 6 backward.
  constexpr int kRanks = 4, kMicrobatches = 64;
  auto comms = make_local_communicators(kRanks, 64);  // 16 floats in flight per pair
  std::vector<float> fwd_back(kMicrobatches), bwd_back(kMicrobatches);
  run_ranks(kRanks, [&](int r) {
    Communicator& c = *comms[r];
    int next = (r + 1) % kRanks, prev = (r + kRanks - 1) % kRanks;
    for (int mb = 0; mb < kMicrobatches; ++mb) {
      if (r == 0) {
        c.send(next, fwd("a", mb), Tensor::scalar_f32(static_cast<float>(mb)));
        fwd_back[mb] = c.recv(prev, fwd("a", mb)).data<float>()[0];
        c.send(prev, bwd("g", mb), Tensor::scalar_f32(fwd_back[mb]));
        bwd_back[mb] = c.recv(next, bwd("g", mb)).data<float>()[0];
      } else {
        float v = c.recv(prev, fwd("a", mb)).data<float>()[0];
        c.send(next, fwd("a", mb), Tensor::scalar_f32(v + 1));
        float g = c.recv(next, bwd("g", mb)).data<float>()[0];
        c.send(prev, bwd("g", mb), Tensor::scalar_f32(g + 1));
      }
    }
  });
  for (int mb = 0; mb < kMicrobatches; ++mb) {
    EXPECT_EQ(fwd_back[mb], mb + 3.0f) << "mb " << mb;
    EXPECT_EQ(bwd_back[mb], mb + 6.0f) << "mb " << mb;
  }
}

TEST(LocalCommunicator, BoundedQueueBlocksSenderUntilDrained) {
  auto comms = make_local_communicators(2, 16);  // one (4) f32 tensor fits
  std::atomic<int> sent{0};
  std::thread sender([&] {
    for (int i = 0; i < 3; ++i) {
      comms[0]->send(1, fwd("x", i), Tensor::from_f32({1, 2, 3, float(i)}, {4}));
      ++sent;
    }
  });
  // Polls with a deadline so that a loaded machine cannot make this flaky.
  auto wait_sent = [&](int n) {
    for (auto end = Clock::now() + 1s; sent.load() < n && Clock::now() < end;) {
      std::this_thread::sleep_for(1ms);
    }
  };
  wait_sent(1);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(sent.load(), 1);  // the second send waits for room
  EXPECT_EQ(comms[1]->recv(0, fwd("x", 0)).at(3), 0);
  wait_sent(2);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(sent.load(), 2);  // the third waits again
  EXPECT_EQ(comms[1]->recv(0, fwd("x", 1)).at(3), 1);
  EXPECT_EQ(comms[1]->recv(0, fwd("x", 2)).at(3), 2);
  sender.join();
  EXPECT_EQ(sent.load(), 3);
  // A message larger than the bound still passes through an empty mailbox.
  comms[0]->send(1, fwd("big", 0), Tensor(DType::kF32, {100}));
  EXPECT_EQ(comms[1]->recv(0, fwd("big", 0)).numel(), 100);
}

TEST(LocalCommunicator, AllreduceIsBitwiseIdenticalRankOrderSum) {
  constexpr int kRanks = 3, kRounds = 4, kN = 257;
  auto comms = make_local_communicators(kRanks, 1 << 20);
  // Values of very different magnitudes so that the summation order shows.
  std::vector<std::vector<float>> inputs(kRanks, std::vector<float>(kN));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int r = 0; r < kRanks; ++r) {
    for (auto& v : inputs[r]) v = u(rng) * (r == 1 ? 1e7f : 1.0f);
  }
  std::vector<float> expected(kN);
  for (int i = 0; i < kN; ++i) expected[i] = (inputs[0][i] + inputs[1][i]) + inputs[2][i];
  std::vector<Tensor> results(kRanks);
  std::vector<int64_t> counts(kRanks);
  run_ranks(kRanks, [&](int r) {
    for (int round = 0; round < kRounds; ++round) {
      Tensor g = Tensor::from_f32(inputs[r], {kN});
      Tensor n = Tensor::from_i64({r + 1, round}, {2});
      comms[r]->allreduce_sum({2, 0, 1}, {&g, &n});  // any order names the same group
      if (round == kRounds - 1) results[r] = g;
      EXPECT_EQ(n.to_i64(), (std::vector<int64_t>{6, 3 * round}));
    }
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(std::memcmp(results[r].raw(), expected.data(), kN * sizeof(float)), 0)
        << "rank " << r;
  }
}

TEST(LocalCommunicator, AllreduceOverSubgroupLeavesOthersAlone) {
  auto comms = make_local_communicators(3, 1 << 20);
  std::vector<Tensor> t = {Tensor::from_f32({1, 2}, {2}), Tensor::from_f32({5, 5}, {2}),
                           Tensor::from_f32({10, 20}, {2})};
  run_ranks(3, [&](int r) {
    if (r != 1) comms[r]->allreduce_sum({0, 2}, {&t[r]});
  });
  EXPECT_EQ(t[0].at(0), 11);
  EXPECT_EQ(t[2].at(1), 22);
  EXPECT_EQ(t[1].at(0), 5);
  Tensor x = Tensor::scalar_f32(1);
  EXPECT_THROW(comms[1]->allreduce_sum({0, 2}, {&x}), RuntimeFault);  // not a member
}

TEST(LocalCommunicator, AbortWakesEveryBlockedRankQuickly) {
  auto comms = make_local_communicators(4, 16);
  comms[0]->send(3, fwd("full", 0), Tensor(DType::kF32, {4}));  // fills (0 -> 3)
  std::vector<std::string> messages(4);
  std::vector<double> woke_ms(4, -1);
  Clock::time_point aborted_at;
  std::atomic<bool> aborted{false};
  std::vector<std::thread> threads;
  auto record = [&](int r, auto fn) {
    threads.emplace_back([&, r, fn] {
      try {
        fn();
      } catch (const RuntimeFault& e) {
        messages[r] = e.what();
        while (!aborted) std::this_thread::yield();
        woke_ms[r] = std::chrono::duration<double, std::milli>(Clock::now() - aborted_at).count();
      }
    });
  };
  record(1, [&] { comms[1]->recv(2, fwd("x", 0)); });
  record(2, [&] {
    Tensor t(DType::kF32, {2});
    comms[2]->allreduce_sum({1, 2}, {&t});
  });
  record(0, [&] { comms[0]->send(3, fwd("y", 0), Tensor(DType::kF32, {4})); });
  std::this_thread::sleep_for(30ms);
  aborted_at = Clock::now();
  aborted = true;
  comms[3]->abort("loss is NaN at step 4");
  comms[3]->abort("a later reason");  // the first reason wins
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(messages[r].find("rank 3"), std::string::npos) << messages[r];
    EXPECT_NE(messages[r].find("loss is NaN at step 4"), std::string::npos) << messages[r];
    EXPECT_GE(woke_ms[r], 0) << "rank " << r;
    EXPECT_LT(woke_ms[r], 100) << "rank " << r;
  }
  // Later calls fail at once too.
  EXPECT_THROW(comms[2]->recv(0, fwd("z", 0)), RuntimeFault);
}

TEST(LocalCommunicator, SpinningReceiveGetsLateMessagesAndAborts) {
  // Polling for 200 ms before sleeping: a message sent during the poll and one
  // sent after it both arrive; an abort during the poll wakes the receiver.
  auto comms = make_local_communicators(2, 1 << 20, 200ms);
  std::thread sender([&] {
    std::this_thread::sleep_for(20ms);
    comms[0]->send(1, fwd("early", 0), Tensor::scalar_f32(1));
    std::this_thread::sleep_for(300ms);
    comms[0]->send(1, fwd("late", 0), Tensor::scalar_f32(2));
  });
  EXPECT_EQ(comms[1]->recv(0, fwd("early", 0)).at(0), 1.0);
  EXPECT_EQ(comms[1]->recv(0, fwd("late", 0)).at(0), 2.0);
  sender.join();
  std::thread aborter([&] {
    std::this_thread::sleep_for(20ms);
    comms[0]->abort("stop");
  });
  const auto start = Clock::now();
  EXPECT_THROW(comms[1]->recv(0, fwd("never", 0)), RuntimeFault);
  const double waited_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  EXPECT_LT(waited_ms, 150);
  aborter.join();
}

TEST(LocalCommunicator, TimeoutsNamePeerAndTag) {
  auto comms = make_local_communicators(3, 16);
  try {
    comms[0]->recv(1, bwd("conv1_grad", 7), 20ms);
    FAIL() << "recv did not time out";
  } catch (const RuntimeFault& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("recv from rank 1"), std::string::npos) << m;
    EXPECT_NE(m.find("bwd 'conv1_grad' mb 7"), std::string::npos) << m;
  }
  comms[0]->send(2, fwd("a", 0), Tensor(DType::kF32, {4}));
  try {
    comms[0]->send(2, fwd("a", 1), Tensor(DType::kF32, {4}), 20ms);
    FAIL() << "send did not time out";
  } catch (const RuntimeFault& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("send to rank 2"), std::string::npos) << m;
    EXPECT_NE(m.find("fwd 'a' mb 1"), std::string::npos) << m;
  }
  Tensor t(DType::kF32, {1});
  try {
    comms[1]->allreduce_sum({0, 1, 2}, {&t}, 20ms);
    FAIL() << "allreduce did not time out";
  } catch (const RuntimeFault& e) {
    EXPECT_NE(std::string(e.what()).find("waiting for ranks {0, 2}"), std::string::npos)
        << e.what();
  }
  // The timed-out member left the round: a complete round still works.
  std::vector<Tensor> ts = {Tensor::scalar_f32(1), Tensor::scalar_f32(2), Tensor::scalar_f32(3)};
  run_ranks(3, [&](int r) { comms[r]->allreduce_sum({0, 1, 2}, {&ts[r]}); });
  EXPECT_EQ(ts[1].at(0), 6);
}

TEST(LocalCommunicator, DestructionWithQueuedMessagesDoesNotHang) {
  auto comms = make_local_communicators(3, 1 << 20);
  for (int mb = 0; mb < 10; ++mb) comms[0]->send(1, fwd("x", mb), Tensor(DType::kF32, {8}));
  comms[2]->send(0, bwd("g", 0), Tensor(DType::kF32, {8}));
  // A peer that goes away wakes whoever waits on it.
  std::string message;
  std::thread waiter([&] {
    try {
      comms[1]->recv(2, fwd("never", 0));
    } catch (const RuntimeFault& e) {
      message = e.what();
    }
  });
  std::this_thread::sleep_for(20ms);
  comms[2].reset();
  waiter.join();
  EXPECT_NE(message.find("destroyed"), std::string::npos) << message;
  comms.clear();
}

}  // namespace
}  // namespace pipetrain::exec
