// The two example programs of seed 003 (MXNet's dependency engine design
// note), with their ordering asserted:
//   1) A = 2; B = A + 1; C = A + 2; D = B * C
//   2) A = 2; B = 2; B = A + B; C = A + 2; A.del()
// Each step records when it started and ended on one atomic clock; values
// live in plain ints, so ThreadSanitizer checks the ordering too. On engines
// with two workers per pool, the steps the note runs in parallel must
// actually overlap (they meet in a Rendezvous).
#include <atomic>
#include <stdexcept>

#include "engine_fixture.h"

namespace depengine::test {
namespace {

using ::testing::HasSubstr;

class SeedExamplesTest : public EngineTest {
 protected:
  // Whether independent steps can be made to meet: two workers in one pool.
  bool CanOverlap() const { return threaded() && workers() >= 2; }

  struct Step {
    int start = -1;
    int end = -1;
  };
  std::atomic<int> clock_{0};
  void Begin(Step& s) { s.start = clock_.fetch_add(1); }
  void End(Step& s) { s.end = clock_.fetch_add(1); }
};

TEST_P(SeedExamplesTest, Program1FanOutThenJoin) {
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    int A = 0, B = 0, C = 0, D = 0;
    Step s1, s2, s3, s4;
    Rendezvous meet23(2);
    std::atomic<int> met{0};
    const bool overlap = CanOverlap();
    DrainGuard drain(engine());
    VarHandle a = engine().NewVariable();
    VarHandle b = engine().NewVariable();
    VarHandle c = engine().NewVariable();
    VarHandle d = engine().NewVariable();
    engine().PushSync([&](RunContext) { Begin(s1); A = 2; End(s1); }, Context::CPU(), {}, {a});
    engine().PushSync(
        [&](RunContext) {
          Begin(s2);
          if (overlap && meet23.ArriveAndWait()) ++met;
          B = A + 1;
          End(s2);
        },
        Context::CPU(), {a}, {b});
    engine().PushSync(
        [&](RunContext) {
          Begin(s3);
          if (overlap && meet23.ArriveAndWait()) ++met;
          C = A + 2;
          End(s3);
        },
        Context::CPU(), {a}, {c});
    engine().PushSync([&](RunContext) { Begin(s4); D = B * C; End(s4); }, Context::CPU(), {b, c},
                      {d});
    engine().WaitForAll();
    EXPECT_EQ(A, 2);
    EXPECT_EQ(B, 3);
    EXPECT_EQ(C, 4);
    EXPECT_EQ(D, 12);
    EXPECT_LT(s1.end, s2.start) << "B = A + 1 started before A = 2 ended";
    EXPECT_LT(s1.end, s3.start) << "C = A + 2 started before A = 2 ended";
    EXPECT_LT(s2.end, s4.start) << "D = B * C started before B = A + 1 ended";
    EXPECT_LT(s3.end, s4.start) << "D = B * C started before C = A + 2 ended";
    if (overlap) {
      EXPECT_EQ(met.load(), 2) << "steps 2 and 3 did not run in parallel";
    }
    for (VarHandle v : {a, b, c, d}) engine().DeleteVariable(nullptr, Context::CPU(), v);
  }
}

TEST_P(SeedExamplesTest, Program2SharedReadsThenDelete) {
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    int A = 0, B = 0, C = 0;
    int a_at_delete = -1;
    Step s1, s2, s3, s4, del;
    Rendezvous meet12(2), meet34(2);
    std::atomic<int> met12{0}, met34{0};
    const bool overlap = CanOverlap();
    DrainGuard drain(engine());
    VarHandle a = engine().NewVariable();
    VarHandle b = engine().NewVariable();
    VarHandle c = engine().NewVariable();
    // 1: A = 2 and 2: B = 2 are independent.
    engine().PushSync(
        [&](RunContext) {
          Begin(s1);
          if (overlap && meet12.ArriveAndWait()) ++met12;
          A = 2;
          End(s1);
        },
        Context::CPU(), {}, {a});
    engine().PushSync(
        [&](RunContext) {
          Begin(s2);
          if (overlap && meet12.ArriveAndWait()) ++met12;
          B = 2;
          End(s2);
        },
        Context::CPU(), {}, {b});
    // 3: B = A + B and 4: C = A + 2 both read A.
    engine().PushSync(
        [&](RunContext) {
          Begin(s3);
          if (overlap && meet34.ArriveAndWait()) ++met34;
          B = A + B;
          End(s3);
        },
        Context::CPU(), {a}, {b});
    engine().PushSync(
        [&](RunContext) {
          Begin(s4);
          if (overlap && meet34.ArriveAndWait()) ++met34;
          C = A + 2;
          End(s4);
        },
        Context::CPU(), {a}, {c});
    // 5: A.del() after every use of A.
    engine().DeleteVariable(
        [&](RunContext) {
          Begin(del);
          a_at_delete = A;
          End(del);
        },
        Context::CPU(), a);
    engine().WaitForAll();
    EXPECT_EQ(B, 4);
    EXPECT_EQ(C, 4);
    EXPECT_EQ(a_at_delete, 2);
    EXPECT_LT(s1.end, s3.start) << "B = A + B started before A = 2 ended";
    EXPECT_LT(s2.end, s3.start) << "B = A + B started before B = 2 ended";
    EXPECT_LT(s1.end, s4.start) << "C = A + 2 started before A = 2 ended";
    EXPECT_LT(s3.end, del.start) << "A.del() started before B = A + B ended";
    EXPECT_LT(s4.end, del.start) << "A.del() started before C = A + 2 ended";
    if (overlap) {
      EXPECT_EQ(met12.load(), 2) << "A = 2 and B = 2 did not run in parallel";
      EXPECT_EQ(met34.load(), 2) << "B = A + B and C = A + 2 did not share A";
    }
    EXPECT_THAT(MessageOf<std::invalid_argument>(
                    [&] { engine().PushSync([](RunContext) {}, Context::CPU(), {a}, {}); }),
                HasSubstr("deleted"));
    engine().DeleteVariable(nullptr, Context::CPU(), b);
    engine().DeleteVariable(nullptr, Context::CPU(), c);
  }
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(SeedExamplesTest);

}  // namespace
}  // namespace depengine::test
