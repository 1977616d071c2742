// Random programs run on every engine and compared with a serial run, in the
// spirit of MXNet's RandSumExpr test: random vars, random read and write
// sets (with duplicates inside a list, which merge), sync and async
// functions completed inline or later on another thread, every property,
// simulated GPU contexts, random priorities, WaitForVar in the middle, and
// in some programs functions that fail, checked against the serial failure
// model (skipped functions pass failures on; WaitForVar rethrows and clears).
//
// Values live in a plain vector: under ThreadSanitizer any ordering the
// engine misses is a reported race. Each program prints its seed on failure;
// DEPENGINE_RANDOM_SEED and DEPENGINE_RANDOM_PROGRAMS override the defaults.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine_fixture.h"

namespace depengine::test {
namespace {

struct Op {
  enum class Kind { kPush, kWaitVar } kind = Kind::kPush;
  std::vector<int> reads;   // as pushed (may hold duplicates)
  std::vector<int> writes;  // as pushed (may hold duplicates)
  std::uint64_t salt = 0;
  bool async = false;
  bool complete_elsewhere = false;  // async: finished by the completer thread
  bool fails = false;
  FnProperty prop = FnProperty::kNormal;
  Context ctx;
  int priority = 0;
  int wait_var = -1;  // kWaitVar
};

struct Program {
  int nvars = 0;
  std::vector<Op> ops;
};

std::vector<int> Unique(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

Program Generate(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Program p;
  p.nvars = pick(2, 8);
  const int nops = pick(4, 40);
  const bool with_failures = seed % 4 == 0;
  for (int i = 0; i < nops; ++i) {
    Op op;
    if (pick(0, 14) == 0) {
      op.kind = Op::Kind::kWaitVar;
      op.wait_var = pick(0, p.nvars - 1);
      p.ops.push_back(op);
      continue;
    }
    std::vector<int> order(p.nvars);
    for (int k = 0; k < p.nvars; ++k) order[k] = k;
    std::shuffle(order.begin(), order.end(), rng);
    const int nwrites = pick(1, std::min(3, p.nvars));
    const int nreads = pick(0, std::min(3, p.nvars - nwrites));
    op.writes.assign(order.begin(), order.begin() + nwrites);
    op.reads.assign(order.begin() + nwrites, order.begin() + nwrites + nreads);
    if (pick(0, 9) == 0) op.writes.push_back(op.writes.front());  // duplicate: merged
    if (!op.reads.empty() && pick(0, 9) == 0) op.reads.push_back(op.reads.back());
    op.salt = rng();
    op.async = pick(0, 2) == 0;
    op.complete_elsewhere = op.async && pick(0, 1) == 0;
    op.fails = with_failures && pick(0, 19) == 0;
    switch (pick(0, 9)) {
      case 0: op.prop = FnProperty::kCPUPrioritized; break;
      case 1: op.prop = FnProperty::kAsync; break;
      case 2: op.prop = FnProperty::kCopyToGPU; break;
      case 3: op.prop = FnProperty::kCopyFromGPU; break;
      default: op.prop = FnProperty::kNormal; break;
    }
    switch (pick(0, 5)) {
      case 0: op.ctx = Context::CPU(1); break;
      case 1: op.ctx = Context::GPU(0); break;
      case 2: op.ctx = Context::GPU(1); break;
      default: op.ctx = Context::CPU(0); break;
    }
    op.priority = pick(0, 3) == 0 ? pick(-3, 3) : 0;
    p.ops.push_back(op);
  }
  return p;
}

// The new value of written var `w`: depends on its old value, the values of
// the vars read, and the op.
std::uint64_t Mix(std::uint64_t old_w, std::uint64_t read_sum, std::uint64_t salt, int w) {
  std::uint64_t x = old_w * 6364136223846793005ULL + read_sum + salt + static_cast<std::uint64_t>(w);
  x ^= x >> 29;
  return x;
}

void Apply(const Op& op, std::vector<std::uint64_t>& vals) {
  std::uint64_t sum = 0;
  for (int r : Unique(op.reads)) sum += vals[r];
  for (int w : Unique(op.writes)) vals[w] = Mix(vals[w], sum, op.salt, w);
}

std::uint64_t InitialValue(int v) { return 1000 + static_cast<std::uint64_t>(v) * 17; }

class RandomFailure : public std::runtime_error {
 public:
  RandomFailure() : std::runtime_error("random failure") {}
};

class RandomProgramTest : public EngineTest {
 protected:
  EngineOptions Options() const override {
    EngineOptions o = EngineTest::Options();
    o.simulated_gpus = 2;
    return o;
  }

  // Runs `p` on the engine and compares with the serial run; returns false
  // (after reporting) on the first difference.
  bool RunAndCompare(const Program& p, Completer& completer) {
    // Serial run with the failure model.
    std::vector<std::uint64_t> expect(p.nvars);
    std::vector<bool> failed(p.nvars, false);
    for (int v = 0; v < p.nvars; ++v) expect[v] = InitialValue(v);
    std::vector<bool> expect_wait_throws;
    for (const Op& op : p.ops) {
      if (op.kind == Op::Kind::kWaitVar) {
        expect_wait_throws.push_back(failed[op.wait_var]);
        failed[op.wait_var] = false;
        continue;
      }
      bool skip = op.fails;
      for (int v : op.reads) skip = skip || failed[v];
      for (int v : op.writes) skip = skip || failed[v];
      if (skip) {
        for (int w : op.writes) failed[w] = true;
      } else {
        Apply(op, expect);
      }
    }

    // Engine run.
    std::vector<std::uint64_t> vals(p.nvars);  // plain on purpose
    for (int v = 0; v < p.nvars; ++v) vals[v] = InitialValue(v);
    std::vector<VarHandle> vars(p.nvars);
    for (auto& v : vars) v = engine().NewVariable();
    auto handles = [&](const std::vector<int>& ids) {
      std::vector<VarHandle> h;
      for (int i : ids) h.push_back(vars[i]);
      return h;
    };
    bool ok = true;
    std::size_t wait_index = 0;
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      const Op& op = p.ops[i];
      if (op.kind == Op::Kind::kWaitVar) {
        bool threw = false;
        try {
          engine().WaitForVar(vars[op.wait_var]);
        } catch (const RandomFailure&) {
          threw = true;
        }
        const bool expected = expect_wait_throws[wait_index++];
        EXPECT_EQ(threw, expected) << "op " << i << ": WaitForVar(var " << op.wait_var << ")";
        ok = ok && threw == expected;
        continue;
      }
      const Op* opp = &op;
      if (!op.async) {
        engine().PushSync(
            [&vals, opp](RunContext) {
              if (opp->fails) throw RandomFailure();
              Apply(*opp, vals);
            },
            op.ctx, handles(op.reads), handles(op.writes), op.prop, op.priority);
      } else {
        engine().PushAsync(
            [&vals, &completer, opp](RunContext, CallbackOnComplete cb) {
              auto finish = [&vals, opp, cb] {
                if (opp->fails) {
                  cb(std::make_exception_ptr(RandomFailure()));
                  return;
                }
                Apply(*opp, vals);
                cb();
              };
              if (opp->complete_elsewhere) {
                completer.Post(finish);
              } else {
                finish();
              }
            },
            op.ctx, handles(op.reads), handles(op.writes), op.prop, op.priority);
      }
    }
    for (int v = 0; v < p.nvars; ++v) {
      bool threw = false;
      try {
        engine().WaitForVar(vars[v]);
      } catch (const RandomFailure&) {
        threw = true;
      }
      EXPECT_EQ(threw, static_cast<bool>(failed[v])) << "final WaitForVar(var " << v << ")";
      ok = ok && threw == failed[v];
    }
    try {
      engine().WaitForAll();  // may report a failure that no var holds any more
    } catch (const RandomFailure&) {
    }
    for (int v = 0; v < p.nvars; ++v) {
      EXPECT_EQ(vals[v], expect[v]) << "var " << v;
      ok = ok && vals[v] == expect[v];
    }
    for (VarHandle v : vars) engine().DeleteVariable(nullptr, Context::CPU(), v);
    return ok;
  }
};

std::uint64_t EnvOr(const char* name, std::uint64_t fallback) {
  const char* s = std::getenv(name);
  return s != nullptr && *s != '\0' ? std::strtoull(s, nullptr, 10) : fallback;
}

TEST_P(RandomProgramTest, MatchesTheSerialRun) {
  const std::uint64_t base = EnvOr("DEPENGINE_RANDOM_SEED", 20240601);
  const std::uint64_t programs = EnvOr("DEPENGINE_RANDOM_PROGRAMS", 2000);
  Completer completer;
  DrainGuard drain(engine());
  for (std::uint64_t i = 0; i < programs; ++i) {
    const std::uint64_t seed = base + i;
    SCOPED_TRACE("program seed " + std::to_string(seed) +
                 " (rerun: DEPENGINE_RANDOM_SEED=" + std::to_string(seed) +
                 " DEPENGINE_RANDOM_PROGRAMS=1)");
    const Program p = Generate(seed);
    if (!RunAndCompare(p, completer)) break;  // one reported program is enough
  }
  engine().WaitForAll();
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(RandomProgramTest);

}  // namespace
}  // namespace depengine::test
