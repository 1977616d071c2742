// A stream processed as it comes, in bounded memory (docs/guide.md,
// "Deleting vars" and "Bounding the work in flight").
//
// A reader hands out chunks of data much faster than the workers process
// them. Each chunk gets a var and a buffer of its own: one function fills
// the buffer, one folds it into a running checksum, and DeleteVariable frees
// it once both are done, without a wait on the reader's thread.
// max_in_flight bounds the functions pushed and not finished, so however
// long the stream, only about that many buffers are alive at once: the
// reader waits when it gets too far ahead. Without the bound this program
// would hold most of the stream in memory.
//
// Checks the checksum against a serial computation, that every buffer was
// freed, and that at most max_in_flight + 1 buffers were alive at once.
// Why + 1: a buffer that is alive holds a unit of the bound through its
// deletion, pushed and not finished (its count drops before the unit is
// given back), except the newest chunk's before the reader pushes its
// deletion. Deletions never wait for room, so that memory can always come
// back, but here each follows a push that did wait, and the units in
// flight other than the newest chunk's stay within the bound. Exits 1 when
// any of these does not hold.
// Usage: streaming
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "depengine/engine.h"

using namespace depengine;

namespace {

constexpr int kChunks = 10'000;
constexpr std::size_t kValuesPerChunk = 512;
constexpr std::size_t kMaxInFlight = 64;

// The stream's data: the value at position j of chunk i.
std::uint64_t StreamValue(int i, std::size_t j) {
  return static_cast<std::uint64_t>(i) * 1'000'003u + j * 7919u;
}

// The checksum's step; its order matters, so the folds must run in push order.
std::uint64_t Fold(std::uint64_t sum, std::uint64_t value) {
  sum = (sum ^ value) * 0x9e3779b97f4a7c15u;
  return sum ^ (sum >> 29);
}

// Buffers alive now, and the most alive at once. A buffer is counted from
// the fill that allocates it to the deletion that frees it.
std::atomic<int> live_buffers{0};
std::atomic<int> peak_live_buffers{0};

void CountNewBuffer() {
  const int now = live_buffers.fetch_add(1) + 1;
  int peak = peak_live_buffers.load();
  while (now > peak && !peak_live_buffers.compare_exchange_weak(peak, now)) {
  }
}

}  // namespace

int main() {
  EngineOptions options = EngineOptions::FromEnv();  // DEPENGINE_ENGINE_TYPE picks the kind
  options.max_in_flight = kMaxInFlight;
  auto engine = CreateEngine(options);
  const Context cpu = Context::CPU();

  std::uint64_t checksum = 0;
  VarHandle checksum_var = engine->NewVariable();
  for (int i = 0; i < kChunks; ++i) {
    auto* buffer = new std::vector<std::uint64_t>;
    VarHandle chunk = engine->NewVariable();
    engine->PushSync(
        [buffer, i](RunContext) {
          buffer->resize(kValuesPerChunk);
          CountNewBuffer();
          for (std::size_t j = 0; j < kValuesPerChunk; ++j) (*buffer)[j] = StreamValue(i, j);
        },
        cpu, {}, {chunk}, FnProperty::kNormal, 0, "read chunk");
    engine->PushSync(
        [buffer, &checksum](RunContext) {
          for (std::uint64_t v : *buffer) checksum = Fold(checksum, v);
        },
        cpu, {chunk}, {checksum_var}, FnProperty::kNormal, 0, "fold chunk");
    // Runs after both functions above; the reader goes on at once.
    engine->DeleteVariable(
        [buffer](RunContext) {
          delete buffer;
          live_buffers.fetch_sub(1);
        },
        cpu, chunk);
  }
  engine->WaitForVar(checksum_var);

  std::uint64_t expected = 0;
  for (int i = 0; i < kChunks; ++i) {
    for (std::size_t j = 0; j < kValuesPerChunk; ++j) expected = Fold(expected, StreamValue(i, j));
  }
  engine->DeleteVariable({}, cpu, checksum_var);
  engine->WaitForAll();  // every deletion has run

  const int peak = peak_live_buffers.load();
  std::printf(
      "%s: %d chunks of %zu values, checksum %016llx; buffers alive at once: %d at the "
      "most (max_in_flight %zu)\n",
      EngineKindName(options.kind), kChunks, kValuesPerChunk,
      static_cast<unsigned long long>(checksum), peak, kMaxInFlight);
  bool ok = true;
  if (checksum != expected) {
    std::printf("FAILED: checksum %016llx, serial run %016llx\n",
                static_cast<unsigned long long>(checksum),
                static_cast<unsigned long long>(expected));
    ok = false;
  }
  if (live_buffers.load() != 0) {
    std::printf("FAILED: %d buffers never freed\n", live_buffers.load());
    ok = false;
  }
  if (peak > static_cast<int>(kMaxInFlight) + 1) {
    std::printf("FAILED: %d buffers alive at once, more than max_in_flight + 1 = %zu\n", peak,
                kMaxInFlight + 1);
    ok = false;
  }
  return ok ? 0 : 1;
}
