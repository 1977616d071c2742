// Semantics point 1: two functions where one writes a var that the other
// reads or writes run in push order; functions that only read a var share
// it; everything else may run concurrently, and does on worker threads.
//
// Shared data touched by engine functions is plain (non-atomic) on purpose:
// under ThreadSanitizer any missing ordering is a reported race.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "engine_fixture.h"

namespace depengine::test {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

class OrderingTest : public EngineTest {};

// Counts the functions inside a critical region with a plain int (a race
// under TSan if two overlap) and an atomic (caught in every build).
struct OverlapProbe {
  int inside_plain = 0;
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};

  void Enter() {
    const int now = inside.fetch_add(1) + 1;
    int seen = max_inside.load();
    while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
    }
    ++inside_plain;
  }
  void Leave() {
    --inside_plain;
    inside.fetch_sub(1);
  }
};

TEST_P(OrderingTest, WritersOfOneVarRunInPushOrderWithoutOverlap) {
  constexpr int kN = 300;
  std::vector<int> log;  // plain: written by every function
  OverlapProbe probe;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  for (int i = 0; i < kN; ++i) {
    engine().PushSync(
        [&, i](RunContext) {
          probe.Enter();
          log.push_back(i);
          probe.Leave();
        },
        Context::CPU(), {}, {v});
  }
  engine().WaitForVar(v);
  std::vector<int> expected(kN);
  for (int i = 0; i < kN; ++i) expected[i] = i;
  EXPECT_THAT(log, ElementsAreArray(expected));
  EXPECT_EQ(probe.max_inside.load(), 1);
}

TEST_P(OrderingTest, WriterWaitsForEveryEarlierReaderAndReadersSeeEarlierWriter) {
  constexpr int kReaders = 16;
  int value = 0;                  // plain
  int seen[kReaders] = {};        // plain: slot i written by reader i
  bool reader_done[kReaders] = {};
  int writer_saw_done = -1;
  int writer_saw_value = -1;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  engine().PushSync([&](RunContext) { value = 1; }, Context::CPU(), {}, {v});
  for (int i = 0; i < kReaders; ++i) {
    engine().PushSync(
        [&, i](RunContext) {
          seen[i] = value;
          reader_done[i] = true;
        },
        Context::CPU(), {v}, {});
  }
  engine().PushSync(
      [&](RunContext) {
        int done = 0;
        for (bool d : reader_done) done += d ? 1 : 0;
        writer_saw_done = done;
        value = 2;
      },
      Context::CPU(), {}, {v});
  engine().PushSync([&](RunContext) { writer_saw_value = value; }, Context::CPU(), {v}, {});
  engine().WaitForAll();
  for (int i = 0; i < kReaders; ++i) EXPECT_EQ(seen[i], 1) << "reader " << i;
  EXPECT_EQ(writer_saw_done, kReaders);
  EXPECT_EQ(writer_saw_value, 2);
}

TEST_P(OrderingTest, ReadersShareAVarWhileAWriterWaitsForThemAll) {
  Event second_reader_ran;
  Event writer_ran;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  Hold first_reader(engine(), {v}, {});
  ASSERT_TRUE(first_reader.WaitStarted());
  // A second reader does not wait for the first, still unfinished, one.
  engine().PushSync([&](RunContext) { second_reader_ran.Notify(); }, Context::CPU(), {v}, {});
  EXPECT_TRUE(second_reader_ran.WaitFor()) << "a reader waited for another reader of the same var";
  // A writer waits for every reader before it.
  engine().PushSync([&](RunContext) { writer_ran.Notify(); }, Context::CPU(), {}, {v});
  ExpectQuiet(writer_ran, "a writer ran while an earlier reader of its var was unfinished");
  first_reader.Release();
  EXPECT_TRUE(writer_ran.WaitFor());
}

TEST_P(OrderingTest, AWholeRunOfWaitingReadersIsGrantedAtOnce) {
  // A run of readers queued behind a writer, long enough to span several
  // ReaderGroups, some reading only v (the one-var push) and some v and a
  // var of their own: when the writer finishes, every one of them starts,
  // although none has finished (each keeps its var, as a Hold), and the
  // writer queued behind the run starts only after the last one finishes.
  // Then the readers behind that writer start together too.
  constexpr int kReaders = 40;
  constexpr int kLaterReaders = 15;
  Event second_writer_ran;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  std::vector<VarHandle> own(kReaders);
  for (VarHandle& o : own) o = engine().NewVariable();
  auto first_writer = std::make_unique<Hold>(engine(), std::vector<VarHandle>{},
                                             std::vector<VarHandle>{v});
  ASSERT_TRUE(first_writer->WaitStarted());
  std::vector<std::unique_ptr<Hold>> readers;
  for (int i = 0; i < kReaders; ++i) {
    const std::vector<VarHandle> reads =
        i % 3 == 1 ? std::vector<VarHandle>{v, own[i]} : std::vector<VarHandle>{v};
    readers.push_back(std::make_unique<Hold>(engine(), reads, std::vector<VarHandle>{}));
  }
  engine().PushSync([&](RunContext) { second_writer_ran.Notify(); }, Context::CPU(), {}, {v});
  std::vector<std::unique_ptr<Hold>> later_readers;
  for (int i = 0; i < kLaterReaders; ++i) {
    later_readers.push_back(
        std::make_unique<Hold>(engine(), std::vector<VarHandle>{v}, std::vector<VarHandle>{}));
  }
  for (int i = 0; i < kReaders; ++i) {
    EXPECT_FALSE(readers[i]->Started()) << "reader " << i << " ran before the writer it follows";
  }
  first_writer->Release();
  for (int i = 0; i < kReaders; ++i) {
    ASSERT_TRUE(readers[i]->WaitStarted())
        << "reader " << i << " of the run did not start while the others still held the var";
  }
  for (int i = 0; i + 1 < kReaders; ++i) readers[i]->Release();
  ExpectQuiet(second_writer_ran, "a writer ran while a reader before it was unfinished");
  for (int i = 0; i < kLaterReaders; ++i) {
    EXPECT_FALSE(later_readers[i]->Started()) << "a reader ran before the writer it follows";
  }
  readers.back()->Release();
  EXPECT_TRUE(second_writer_ran.WaitFor());
  for (int i = 0; i < kLaterReaders; ++i) {
    EXPECT_TRUE(later_readers[i]->WaitStarted()) << "later reader " << i << " did not start";
  }
  for (auto& r : later_readers) r->Release();
  engine().WaitForAll();
}

TEST_P(OrderingTest, ReaderWaitsForEarlierWriterAndLaterReadersWaitToo) {
  Event reader_ran;
  Event later_writer_ran;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  Hold writer(engine(), {}, {v});
  ASSERT_TRUE(writer.WaitStarted());
  engine().PushSync([&](RunContext) { reader_ran.Notify(); }, Context::CPU(), {v}, {});
  engine().PushSync([&](RunContext) { later_writer_ran.Notify(); }, Context::CPU(), {}, {v});
  ExpectQuiet(reader_ran, "a reader ran while an earlier writer of its var was unfinished");
  EXPECT_FALSE(later_writer_ran.IsSet());
  writer.Release();
  EXPECT_TRUE(reader_ran.WaitFor());
  EXPECT_TRUE(later_writer_ran.WaitFor());
}

TEST_P(OrderingTest, FunctionWaitsForEachOfItsVarsAndSuccessorsWaitForIt) {
  // f writes {a, b} while a is held, so f waits; g reads only b, which is
  // free, yet must wait for f, pushed before it. h uses c only and must not
  // wait at all.
  std::vector<char> order;  // plain
  Event h_ran;
  DrainGuard drain(engine());
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  VarHandle c = engine().NewVariable();
  Hold hold_a(engine(), {}, {a});
  ASSERT_TRUE(hold_a.WaitStarted());
  engine().PushSync([&](RunContext) { order.push_back('f'); }, Context::CPU(), {}, {a, b});
  engine().PushSync([&](RunContext) { order.push_back('g'); }, Context::CPU(), {b}, {});
  engine().PushSync([&](RunContext) { h_ran.Notify(); }, Context::CPU(), {}, {c});
  // Work on an unrelated var is not held up by the blocked var.
  EXPECT_TRUE(h_ran.WaitFor()) << "a function on an unrelated var waited for a held var";
  hold_a.Release();
  engine().WaitForAll();
  EXPECT_THAT(order, ElementsAreArray({'f', 'g'}));
}

// A function with a long var list waits for each of its vars, whatever the
// order of the list: the push sorts it, and an ascending, a descending, a
// shuffled list and a nearly ascending one whose lowest keys come last
// (few descents, long moves) each take their own way through the sort. For
// each order, one var's writer is held while every other var is free, and
// the function must wait for that writer; the list also names a var twice
// (merged), and naming one of its vars as written too is refused.
TEST_P(OrderingTest, LongVarListInAnyOrderWaitsForEachVar) {
  DrainGuard drain(engine());
  std::mt19937 rng(7);
  for (std::size_t count : {40u, 200u}) {
    std::vector<VarHandle> by_address(count);
    for (VarHandle& v : by_address) v = engine().NewVariable();
    std::sort(by_address.begin(), by_address.end(), std::less<>());
    std::vector<std::vector<VarHandle>> orders;
    orders.push_back(by_address);
    orders.emplace_back(by_address.rbegin(), by_address.rend());
    orders.push_back(by_address);
    std::shuffle(orders.back().begin(), orders.back().end(), rng);
    orders.push_back(by_address);
    std::rotate(orders.back().begin(), orders.back().begin() + count / 8, orders.back().end());
    for (std::size_t o = 0; o < orders.size(); ++o) {
      std::vector<VarHandle> list = orders[o];
      list.push_back(list[count / 3]);
      EXPECT_THAT(MessageOf<std::invalid_argument>([&] {
                    engine().PushSync([](RunContext) {}, Context::CPU(), list, {list[count / 2]});
                  }),
                  HasSubstr("both const_vars and mutable_vars"))
          << count << " vars, order " << o;
      for (std::size_t held : {std::size_t{0}, count / 2, count - 1}) {
        CallbackOnComplete finish = PushAsyncAndHoldItsCallback(engine(), by_address[held]);
        std::atomic<bool> ran{false};
        engine().PushSync([&](RunContext) { ran = true; }, Context::CPU(), list, {});
        // Time for a function that did not wait to run: the naive engine
        // runs it inside PushSync, a threaded one takes it from its queue
        // before this later, unrelated one.
        VarHandle unrelated = engine().NewVariable();
        engine().PushSync([](RunContext) {}, Context::CPU(), {}, {unrelated});
        engine().WaitForVar(unrelated);
        EXPECT_FALSE(ran.load()) << count << " vars, order " << o << ": ran before var " << held;
        finish();
        engine().WaitForAll();
        EXPECT_TRUE(ran.load()) << count << " vars, order " << o;
        engine().DeleteVariable([](RunContext) {}, Context::CPU(), unrelated);
      }
    }
    for (VarHandle v : by_address) engine().DeleteVariable([](RunContext) {}, Context::CPU(), v);
  }
}

TEST_P(OrderingTest, InterleavedReadersAndWritersOnSeveralVarsFollowPushOrder) {
  // A small fixed program over three vars; each function appends to a
  // per-var history (plain), and the histories must equal the serial run.
  constexpr int kVars = 3;
  long value[kVars] = {1, 2, 3};  // plain
  std::vector<long> history[kVars];
  DrainGuard drain(engine());
  VarHandle vars[kVars];
  for (auto& v : vars) v = engine().NewVariable();
  long serial[kVars] = {1, 2, 3};
  std::vector<long> serial_history[kVars];
  for (int step = 0; step < 60; ++step) {
    const int w = step % kVars;
    const int r = (step * 7 + 1) % kVars;
    if (r == w) {
      serial[w] = serial[w] * 3 + step;
      serial_history[w].push_back(serial[w]);
      engine().PushSync(
          [&, w, step](RunContext) {
            value[w] = value[w] * 3 + step;
            history[w].push_back(value[w]);
          },
          Context::CPU(), {}, {vars[w]});
    } else {
      serial[w] = serial[w] + serial[r] * 2 + step;
      serial_history[w].push_back(serial[w]);
      engine().PushSync(
          [&, w, r, step](RunContext) {
            value[w] = value[w] + value[r] * 2 + step;
            history[w].push_back(value[w]);
          },
          Context::CPU(), {vars[r]}, {vars[w]});
    }
  }
  engine().WaitForAll();
  for (int i = 0; i < kVars; ++i) {
    EXPECT_EQ(value[i], serial[i]) << "var " << i;
    EXPECT_EQ(history[i], serial_history[i]) << "var " << i;
  }
}

TEST_P(OrderingTest, IndependentFunctionsRunConcurrently) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs one function at a time, by design";
  // Two functions with disjoint vars (and a shared read var) must be running
  // at the same moment: each waits for the other inside its body.
  Context second_ctx = Context::CPU();
  if (workers() < 2) {
    if (kind() == EngineKind::kPooled) {
      GTEST_SKIP() << "a pooled engine with 1 worker has one thread for normal work";
    }
    second_ctx = Context::CPU(1);  // per-device: CPU(1) has its own pool
  }
  Rendezvous meet(2);
  std::atomic<int> met{0};
  DrainGuard drain(engine());
  VarHandle shared = engine().NewVariable();
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  engine().PushSync([&](RunContext) { met += meet.ArriveAndWait() ? 1 : 0; }, Context::CPU(),
                    {shared}, {a});
  engine().PushSync([&](RunContext) { met += meet.ArriveAndWait() ? 1 : 0; }, second_ctx, {shared},
                    {b});
  engine().WaitForAll();
  EXPECT_EQ(met.load(), 2) << "independent functions did not run at the same time";
}

TEST_P(OrderingTest, ReadersOfOneVarRunConcurrently) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs one function at a time, by design";
  if (workers() < 2) GTEST_SKIP() << "two readers need two workers of one pool to overlap";
  Rendezvous meet(2);
  std::atomic<int> met{0};
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  for (int i = 0; i < 2; ++i) {
    engine().PushSync([&](RunContext) { met += meet.ArriveAndWait() ? 1 : 0; }, Context::CPU(),
                      {v}, {});
  }
  engine().WaitForAll();
  EXPECT_EQ(met.load(), 2) << "two readers of one var did not run at the same time";
}

TEST_P(OrderingTest, ReadersReleasedTogetherWakeEnoughSleepingWorkersToRunTogether) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs one function at a time, by design";
  // A write's completion on a worker makes four readers ready at once: the
  // worker runs one itself and queues the other three in one batch while
  // the pool's three other workers sleep (no spinning). The batch must wake
  // all three, or the readers, which wait for each other, never meet.
  constexpr int kReaders = 4;
  EngineOptions o = Options();
  o.cpu_worker_threads = kReaders;
  o.worker_spin_us = 0;
  auto e = CreateEngine(o);
  Rendezvous meet(kReaders);
  std::atomic<int> met{0};
  VarHandle v = e->NewVariable();
  e->PushSync(
      [](RunContext) {
        // Not synchronization: time for the idle workers to go to sleep, so
        // that the batch finds them asleep rather than spinning.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      },
      Context::CPU(), {}, {v});
  for (int i = 0; i < kReaders; ++i) {
    e->PushSync([&](RunContext) { met += meet.ArriveAndWait() ? 1 : 0; }, Context::CPU(), {v}, {});
  }
  e->WaitForAll();
  EXPECT_EQ(met.load(), kReaders) << "readers made ready together did not all run at once";
}

TEST_P(OrderingTest, FunctionPushedFromInsideAFunctionRunsWhileItsParentStillRuns) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs one function at a time, by design";
  if (workers() < 2) GTEST_SKIP() << "parent and child need two workers of one pool to overlap";
  // The parent pushes an independent child and keeps working until the
  // child has started. With an idle second worker the child must not wait
  // for its parent to return.
  Event child_started;
  std::atomic<bool> parent_saw_child{false};
  DrainGuard drain(engine());
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  engine().PushSync(
      [&](RunContext) {
        engine().PushSync([&](RunContext) { child_started.Notify(); }, Context::CPU(), {}, {b});
        parent_saw_child = child_started.WaitFor();
      },
      Context::CPU(), {}, {a});
  engine().WaitForAll();
  EXPECT_TRUE(parent_saw_child.load())
      << "a ready function pushed from inside a running function waited for that function to "
         "return although another worker was idle";
}

// The same, one step removed: the parent runs a kAsync function inline (it
// is ready at push), and that function's successor becomes ready while the
// parent's body still runs. The successor must not be kept as the worker's
// next function (a continuation), to run only once the parent returns.
TEST_P(OrderingTest, SuccessorOfAnInlineAsyncFunctionRunsWhileTheBodyAroundItStillRuns) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs one function at a time, by design";
  if (workers() < 2) GTEST_SKIP() << "parent and successor need two workers of one pool to overlap";
  Event successor_started;
  std::atomic<bool> parent_saw_successor{false};
  DrainGuard drain(engine());
  VarHandle a = engine().NewVariable();
  VarHandle y = engine().NewVariable();
  VarHandle z = engine().NewVariable();
  engine().PushSync(
      [&](RunContext) {
        // Runs inline, inside this push, and pushes its successor (it waits
        // for y); the successor becomes ready as the kAsync function ends.
        engine().PushSync(
            [&](RunContext) {
              engine().PushSync([&](RunContext) { successor_started.Notify(); }, Context::CPU(),
                                {y}, {z});
            },
            Context::CPU(), {}, {y}, FnProperty::kAsync);
        parent_saw_successor = successor_started.WaitFor();
      },
      Context::CPU(), {}, {a});
  engine().WaitForAll();
  EXPECT_TRUE(parent_saw_successor.load())
      << "the successor of a kAsync function run inside a running body waited for that body "
         "to return although another worker was idle";
}

// The same when the kAsync function becomes ready inside the body because
// the body calls the callback of the async function it waits for.
TEST_P(OrderingTest, SuccessorOfAKAsyncFunctionReadiedByACallbackInABodyRunsWhileTheBodyRuns) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs one function at a time, by design";
  if (workers() < 2) GTEST_SKIP() << "parent and successor need two workers of one pool to overlap";
  DrainGuard drain(engine());
  VarHandle a = engine().NewVariable();
  VarHandle x = engine().NewVariable();
  VarHandle y = engine().NewVariable();
  VarHandle z = engine().NewVariable();
  CallbackOnComplete held = PushAsyncAndHoldItsCallback(engine(), x);
  Event successor_started;
  engine().PushSync([](RunContext) {}, Context::CPU(), {x}, {y}, FnProperty::kAsync);
  engine().PushSync([&](RunContext) { successor_started.Notify(); }, Context::CPU(), {y}, {z});
  std::atomic<bool> parent_saw_successor{false};
  engine().PushSync(
      [&](RunContext) {
        held();  // runs the kAsync function here, which readies the successor
        parent_saw_successor = successor_started.WaitFor();
      },
      Context::CPU(), {}, {a});
  engine().WaitForAll();
  EXPECT_TRUE(parent_saw_successor.load())
      << "the successor of a kAsync function readied by a callback inside a running body "
         "waited for that body to return although another worker was idle";
}

TEST_P(OrderingTest, SuccessorsOfOneWriterAllRunAndEachSeesIt) {
  // One writer makes many readers ready at once; with several workers they
  // spread out, and each must see the write.
  constexpr int kReaders = 64;
  int value = 0;
  int seen[kReaders] = {};
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  Hold hold(engine(), {}, {v});
  ASSERT_TRUE(hold.WaitStarted());
  engine().PushSync([&](RunContext) { value = 42; }, Context::CPU(), {}, {v});
  for (int i = 0; i < kReaders; ++i) {
    engine().PushSync(
        [&, i](RunContext) { seen[i] = value; }, Context::CPU(), {v}, {});
  }
  hold.Release();
  engine().WaitForAll();
  for (int i = 0; i < kReaders; ++i) EXPECT_EQ(seen[i], 42) << "reader " << i;
}

TEST_P(OrderingTest, ReadsPushedWhileTheirVarsChainDrainsSeeEveryEarlierWrite) {
  // A chain of writes of one var, each followed by a function that reads it
  // and writes one of 16 others, pushed as fast as the pusher goes. The
  // chain's completions keep moving earlier pushes from the var's inbox to
  // its FIFO, and publish the var's new state only after that; a push that
  // reads the state just before then and finds the var's lock free must
  // still queue behind the FIFO (Var::TryGrantNowLocked). A mutation that
  // granted past a non-empty FIFO there passed every other ordering test;
  // only the fork test's child, which pushes this pattern, hung. Here a
  // read granted too early sees an older value. Several rounds: the first
  // pushes into cold object pools, slowly enough that the race is rare. The
  // race stays a matter of timing here (a busy machine can hide it);
  // VarTest.APushThatSawTheVarIdleTooEarlyStillQueuesBehindTheFifo plays
  // the interleaving step by step on one var.
  constexpr int kRounds = 8;
  constexpr int kPairs = 20000;
  constexpr int kOthers = 16;
  DrainGuard drain(engine());
  VarHandle chain = engine().NewVariable();
  std::vector<VarHandle> others(kOthers);
  for (auto& v : others) v = engine().NewVariable();
  for (int round = 0; round < kRounds; ++round) {
    long chain_value = 0;                // plain: the chain's functions write it
    std::vector<long> seen(kPairs, -1);  // plain: element i by reader i
    for (int i = 0; i < kPairs; ++i) {
      engine().PushSync([&](RunContext) { ++chain_value; }, Context::CPU(), {}, {chain});
      engine().PushSync([&, i](RunContext) { seen[static_cast<std::size_t>(i)] = chain_value; },
                        Context::CPU(), {chain}, {others[static_cast<std::size_t>(i % kOthers)]});
    }
    engine().WaitForAll();
    ASSERT_EQ(chain_value, kPairs) << "round " << round;
    for (int i = 0; i < kPairs; ++i) {
      ASSERT_EQ(seen[static_cast<std::size_t>(i)], i + 1)
          << "round " << round << ": reader " << i
          << " did not see the value of the write pushed just before it";
    }
  }
  engine().DeleteVariable({}, Context::CPU(), chain);
  for (VarHandle v : others) engine().DeleteVariable({}, Context::CPU(), v);
  engine().WaitForAll();
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(OrderingTest);

}  // namespace
}  // namespace depengine::test
