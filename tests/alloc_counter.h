// Counts the allocations made through operator new, and their bytes, on every thread, while
// counting is on. Linking alloc_counter.cc into a test binary replaces the
// global operator new and delete of that binary, except in sanitizer builds,
// whose runtimes own operator new (then AllocationCountingAvailable() is
// false).
#pragma once

namespace depengine::test {

// False when this build cannot replace operator new.
bool AllocationCountingAvailable();
// Starts counting from zero.
void StartCountingAllocations();
// Stops counting and returns the allocations made since the start.
long StopCountingAllocations();
// The bytes those allocations asked for (the last counting's, once stopped).
long CountedAllocationBytes();

}  // namespace depengine::test
