// TaskQueue on its own: every block pushed is popped exactly once, by
// producers and consumers racing (with pauses long enough for consumers to
// fall asleep), and the pop order honours priorities and FIFO order.
#include "exec/task_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "test_scale.h"
#include "wait_timeout.h"

namespace depengine::internal {

// Called by the queue between a producer's tail exchange and its link (see
// tests/CMakeLists.txt): now and then the producer gives up its core there,
// so consumers meet the half-linked queue often.
void TaskQueueLinkHook() {
  thread_local unsigned calls = 0;
  if (++calls % 7 == 0) std::this_thread::yield();
}

namespace {

std::unique_ptr<OprBlock[]> MakeBlocks(int n) { return std::make_unique<OprBlock[]>(n); }

TEST(TaskQueueTest, PopOrderIsPriorityThenFifo) {
  TaskQueue q{std::chrono::microseconds(EngineOptions::kDefaultWorkerSpinUs)};
  auto blocks = MakeBlocks(8);
  const int priorities[8] = {0, 5, -3, 0, 7, 0, -1, 5};
  for (int i = 0; i < 8; ++i) {
    blocks[i].priority = priorities[i];
    q.Push(&blocks[i]);
  }
  // SizeHint counts profiled blocks only, in the FIFO and the heap alike.
  EXPECT_EQ(q.SizeHint(), 0u);
  std::vector<int> order;
  for (int i = 0; i < 8; ++i) {
    OprBlock* b = q.Pop([] {});
    ASSERT_NE(b, nullptr);
    order.push_back(static_cast<int>(b - blocks.get()));
  }
  // 7 first, then the two 5s (heap order among equals is unspecified), then
  // the priority-0 blocks in push order, then -1, then -3.
  EXPECT_EQ(order[0], 4);
  EXPECT_TRUE((order[1] == 1 && order[2] == 7) || (order[1] == 7 && order[2] == 1));
  EXPECT_EQ(order[3], 0);
  EXPECT_EQ(order[4], 3);
  EXPECT_EQ(order[5], 5);
  EXPECT_EQ(order[6], 6);
  EXPECT_EQ(order[7], 2);
  q.Stop();
  EXPECT_EQ(q.Pop([] {}), nullptr);
}

TEST(TaskQueueTest, SizeHintCountsProfiledBlocks) {
  TaskQueue q{std::chrono::microseconds(EngineOptions::kDefaultWorkerSpinUs)};
  auto blocks = MakeBlocks(6);
  alignas(64) static char fake_record[64];  // only compared with nullptr
  // Profiled: 0 and 1 in the FIFO, 2 in the heap; not profiled: 3 in the
  // FIFO, 4 and 5 in the heap (not counted, in either).
  const int priorities[6] = {0, 0, 4, 0, 2, 3};
  for (int i = 0; i < 6; ++i) {
    blocks[i].priority = priorities[i];
    if (i < 3) blocks[i].profile = reinterpret_cast<ProfileRecord*>(fake_record);
    q.Push(&blocks[i]);
  }
  EXPECT_EQ(q.SizeHint(), 3u);
  q.Pop([] {});  // 2 (heap, profiled)
  EXPECT_EQ(q.SizeHint(), 2u);
  q.Pop([] {});  // 5 and 4 (heap)
  q.Pop([] {});
  EXPECT_EQ(q.SizeHint(), 2u);
  q.Pop([] {});  // 0 (FIFO, profiled)
  EXPECT_EQ(q.SizeHint(), 1u);
  q.Pop([] {});
  q.Pop([] {});
  EXPECT_EQ(q.SizeHint(), 0u);
  for (int i = 0; i < 6; ++i) blocks[i].profile = nullptr;
  q.Stop();
}

TEST(TaskQueueTest, MayBypassOnlyWhenNothingOfHigherPriorityWaits) {
  TaskQueue q{std::chrono::microseconds(EngineOptions::kDefaultWorkerSpinUs)};
  auto blocks = MakeBlocks(2);
  EXPECT_TRUE(q.MayBypass(0));
  EXPECT_TRUE(q.MayBypass(-5));
  blocks[0].priority = 0;
  q.Push(&blocks[0]);
  EXPECT_TRUE(q.MayBypass(0));
  EXPECT_FALSE(q.MayBypass(-5));
  blocks[1].priority = 3;
  q.Push(&blocks[1]);
  EXPECT_FALSE(q.MayBypass(0));
  EXPECT_TRUE(q.MayBypass(3));
  q.Pop([] {});
  q.Pop([] {});
  EXPECT_TRUE(q.MayBypass(-5));
  q.Stop();
}

// Producers push every block once (singly and in batches, some with other
// priorities) and pause now and then so that consumers go to sleep; each
// consumer counts what it pops. Every block must be popped exactly once and
// the consumers must all return after Stop.
void RunRace(int producers, int consumers, int per_producer) {
  TaskQueue q{std::chrono::microseconds(EngineOptions::kDefaultWorkerSpinUs)};
  const int total = producers * per_producer;
  auto blocks = MakeBlocks(total);
  std::unique_ptr<std::atomic<int>[]> seen(new std::atomic<int>[total]);
  for (int i = 0; i < total; ++i) {
    seen[i].store(0);
    blocks[i].priority = i % 17 == 0 ? (i % 3) - 1 : 0;  // a few -1, 0, +1
  }
  std::atomic<int> popped{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < consumers; ++c) {
    threads.emplace_back([&] {
      while (OprBlock* b = q.Pop([] {})) {
        seen[b - blocks.get()].fetch_add(1);
        popped.fetch_add(1);
      }
    });
  }
  std::vector<std::thread> pushers;
  for (int p = 0; p < producers; ++p) {
    pushers.emplace_back([&, p] {
      const int base = p * per_producer;
      for (int i = 0; i < per_producer;) {
        if (i % 5 == 0 && i + 4 <= per_producer) {
          OprBlock* batch[4] = {&blocks[base + i], &blocks[base + i + 1], &blocks[base + i + 2],
                                &blocks[base + i + 3]};
          q.PushBatch(batch, 4);
          i += 4;
        } else {
          q.Push(&blocks[base + i]);
          ++i;
        }
        if (i % 997 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
      }
    });
  }
  for (auto& t : pushers) t.join();
  // Every block is found without Stop: nothing may be stranded in the queue
  // while the consumers sleep.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (popped.load() < total && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(popped.load(), total) << "blocks stranded in the queue";
  q.Stop();
  for (auto& t : threads) t.join();
  for (int i = 0; i < total; ++i) ASSERT_EQ(seen[i].load(), 1) << "block " << i;
}

// Sizes scale with DEPENGINE_TEST_SCALE: with more threads than cores these
// run at the speed of the scheduler, and a sanitizer build on a loaded
// machine took up to 36 s for the first at full size.
TEST(TaskQueueTest, OneProducerTwoConsumers) { RunRace(1, 2, support::Scaled(200000, 20000)); }
TEST(TaskQueueTest, ThreeProducersTwoConsumers) { RunRace(3, 2, support::Scaled(60000, 6000)); }
TEST(TaskQueueTest, TwoProducersFourConsumers) { RunRace(2, 4, support::Scaled(60000, 6000)); }

// Producers that each keep exactly one block in flight: the queue runs empty
// all the time, so consumers keep taking the last block (re-pushing the
// stub) while another producer is between its tail exchange and its link.
// A block stranded in that window is never popped: the producer times out.
TEST(TaskQueueTest, LastBlockRacesWithAppend) {
  TaskQueue q{std::chrono::microseconds(EngineOptions::kDefaultWorkerSpinUs)};
  // Two: a third producer's next push would rescue a stranded block.
  constexpr int kProducers = 2;
  // Scaled: every round waits for a consumer, often a sleeping one, so
  // under ThreadSanitizer on a loaded machine 100,000 rounds took 4-120 s.
  const int rounds = support::Scaled(100000, 10000);
  auto blocks = MakeBlocks(kProducers);
  std::unique_ptr<std::atomic<int>[]> taken(new std::atomic<int>[kProducers]);
  for (int p = 0; p < kProducers; ++p) taken[p].store(0);
  std::vector<std::thread> consumers;
  for (int c = 0; c < 2; ++c) {
    consumers.emplace_back([&] {
      while (OprBlock* b = q.Pop([] {})) taken[b - blocks.get()].fetch_add(1);
    });
  }
  std::atomic<bool> stranded{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int r = 1; r <= rounds && !stranded.load(); ++r) {
        q.Push(&blocks[p]);
        // A stranded block stays stranded; the deadline only has to
        // outlast a slow scheduler.
        const auto deadline = std::chrono::steady_clock::now() + support::kWaitTimeout;
        while (taken[p].load() < r) {
          if (std::chrono::steady_clock::now() > deadline) {
            stranded.store(true);
            return;
          }
          std::this_thread::yield();
        }
      }
    });
  }
  for (auto& t : producers) t.join();
  EXPECT_FALSE(stranded.load()) << "a pushed block was never popped";
  q.Stop();
  for (auto& t : consumers) t.join();
}

// Consumers that are mostly asleep: one block at a time with a pause, so
// every push meets sleeping workers (the lost-wake-up window).
TEST(TaskQueueTest, EveryPushWakesASleeper) {
  TaskQueue q{std::chrono::microseconds(EngineOptions::kDefaultWorkerSpinUs)};
  constexpr int kBlocks = 300;
  auto blocks = MakeBlocks(kBlocks);
  std::atomic<int> popped{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < 2; ++c) {
    threads.emplace_back([&] {
      while (q.Pop([] {}) != nullptr) popped.fetch_add(1);
    });
  }
  for (int i = 0; i < kBlocks; ++i) {
    q.Push(&blocks[i]);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (popped.load() <= i && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    ASSERT_EQ(popped.load(), i + 1) << "push " << i << " was not picked up";
    if (i % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  q.Stop();
  for (auto& t : threads) t.join();
}

}  // namespace
}  // namespace depengine::internal
