// The workloads of ../shared/WORKLOADS.md, independent of any runtime: their
// sizes, their function bodies, how W4's random DAG is drawn, and the serial
// runs every implementation checks its result against.
//
// Every implementation of a workload (depengine in workloads.h, the peers in
// bench/peers/) uses these definitions, so that all of them run the same
// program and are checked against the same answer.
#pragma once

#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace depengine::bench {

// W1 chain: `ops` functions, all mutating one var; body `++counter`.
// Check: counter == ops.
struct ChainParams {
  std::size_t ops = 1'000'000;
};

// W2 parallel: function i mutates var[i % vars]; body `++count[i % vars]`.
// Check: every count == ops / vars (ops is a multiple of vars).
struct ParallelParams {
  std::size_t vars = 4'096;
  std::size_t ops = 1'048'576;
};

// W3 fan: `rounds` rounds of: 1 function writes X (X = X + 1); `fan`
// functions each read X and write Y[j] (Y[j] = X + j); 1 function reads every
// Y[j] and writes X (X = sum(Y) mod 2^61-1). ops = rounds * (fan + 2).
// Check: X and every Y[j] equal SerialFan's.
struct FanParams {
  std::size_t rounds = 10'000;
  std::size_t fan = 64;

  std::size_t ops() const { return rounds * (fan + 2); }
};

// W4 random DAG: `ops` functions over `vars` vars; function i reads two vars
// and writes a third, all distinct, drawn from std::mt19937_64(seed). Body:
// spin `spin_us` microseconds, then w = DagMix(w, r1, r2).
// Check: every var equals SerialRandomDag's.
struct RandomDagParams {
  std::size_t vars = 1'000;
  std::size_t ops = 200'000;
  int spin_us = 0;  // T of WORKLOADS.md: 0, 1 or 10
  std::uint64_t seed = 42;
};

// W5 operator reuse: `operators` operators, operator k mutating var k (body
// `++count[k]`), built once with NewOperator and pushed `pushes` times round
// robin. Check: count[k] == the number of pushes of operator k.
struct OperatorReuseParams {
  std::size_t operators = 1;  // 1 or 4,096
  std::size_t pushes = 1'000'000;
};

// Memory per pending function: `ops` functions mutating one var pushed behind
// a function that holds that var until released, so that all of them are
// pending at once.
struct PendingMemoryParams {
  std::size_t ops = 1'000'000;
};

// ------------------------------------------------------------------ W3 fan

// X = sum(Y) mod 2^61-1, summed one term at a time so nothing overflows.
inline constexpr std::uint64_t kFanModulus = (std::uint64_t{1} << 61) - 1;

inline void FanBump(std::uint64_t& x) { x = x + 1; }
inline void FanSpread(std::uint64_t x, std::size_t j, std::uint64_t& y) { y = x + j; }
inline std::uint64_t FanGather(const std::uint64_t* ys, std::size_t fan) {
  std::uint64_t sum = 0;
  for (std::size_t j = 0; j < fan; ++j) sum = (sum + ys[j] % kFanModulus) % kFanModulus;
  return sum;
}

// The values W3 ends with: X, and Y[0..fan).
struct FanValues {
  std::uint64_t x = 0;
  std::vector<std::uint64_t> ys;
};

// Runs W3 serially, from X = 0 and every Y[j] = 0.
FanValues SerialFan(const FanParams& params);

// ------------------------------------------------------------------ W4 random DAG

// One function of W4: the vars it reads and the var it writes, as indices.
struct DagOp {
  std::uint32_t read1;
  std::uint32_t read2;
  std::uint32_t write;
};

// W4's program: `ops` in push order over `vars` vars.
struct RandomDag {
  std::size_t vars = 0;
  std::vector<DagOp> ops;
};

// Draws W4's program: for each function, read1, then read2 (drawn again
// while equal to read1), then write (drawn again while equal to either), each
// std::uniform_int_distribution over [0, vars) on one std::mt19937_64(seed).
// Requires vars >= 3.
RandomDag MakeRandomDag(const RandomDagParams& params);

// The value var v holds before W4 starts.
inline std::uint64_t DagInitialValue(std::size_t v) { return 0x9E3779B97F4A7C15ull * (v + 1); }

// W4's fixed 64-bit hash mix: the new value of the written var.
inline std::uint64_t DagMix(std::uint64_t w, std::uint64_t r1, std::uint64_t r2) {
  std::uint64_t h = w ^ (r1 * 0xBF58476D1CE4E5B9ull) ^ std::rotl(r2, 29);
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 29;
  return h;
}

// W4's work: a busy loop on the steady clock for `us` microseconds (none for 0).
inline void SpinFor(int us) {
  if (us <= 0) return;
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < end) {
  }
}

// Runs W4's program serially, without spinning: the values every var ends with.
std::vector<std::uint64_t> SerialRandomDag(const RandomDag& dag);

// The longest chain of dependent functions in `dag`, in functions, under the
// engine's rules (a write waits for the previous writer and the readers since;
// a read waits for the previous writer). No schedule on any number of
// workers finishes faster than critical path * T, so with P workers the best
// efficiency W4 can reach is min(1, ops / (P * critical path)).
std::size_t DagCriticalPath(const RandomDag& dag);

}  // namespace depengine::bench
