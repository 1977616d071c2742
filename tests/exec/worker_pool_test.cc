// WorkerPool on its own: its threads carry OS names (pthread_setname_np) made
// from the pool's name and the thread's index, within Linux's 15 characters.
#include "exec/worker_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <chrono>
#include <mutex>
#include <set>
#include <string>

namespace depengine::internal {
namespace {

TEST(WorkerThreadOsName, IsThePoolNameAndTheIndex) {
  EXPECT_EQ(WorkerThreadOsName("cpu/normal", 0), "cpu/normal/0");
  EXPECT_EQ(WorkerThreadOsName("cpu/priority", 1), "cpu/priority/1");
  EXPECT_EQ(WorkerThreadOsName("gpu63/normal", 15), "gpu63/normal/15");
}

TEST(WorkerThreadOsName, ALongNameKeepsItsWholeIndexWithinFifteenCharacters) {
  EXPECT_EQ(WorkerThreadOsName("pooled/normal", 1), "pooled/normal/1");
  EXPECT_EQ(WorkerThreadOsName("pooled/normal", 12), "pooled/norma/12");
  EXPECT_EQ(WorkerThreadOsName("pooled/normal", 1234567), "pooled/1234567");
  EXPECT_EQ(WorkerThreadOsName("cpu63/normal", 2147483647), "cpu6/2147483647");
}

TEST(WorkerPool, EachThreadRunsUnderItsOsName) {
  std::mutex mu;
  std::set<std::string> names;  // guarded by mu
  {
    WorkerPool pool("pooled/normal", 12, std::chrono::microseconds(0), [&](WorkerPool&, int) {
      char name[16] = {};
      ASSERT_EQ(pthread_getname_np(pthread_self(), name, sizeof name), 0);
      std::lock_guard<std::mutex> lock(mu);
      names.insert(name);
    });
  }  // joins the threads
  std::set<std::string> expected;
  for (int i = 0; i < 12; ++i) expected.insert(WorkerThreadOsName("pooled/normal", i));
  EXPECT_EQ(names, expected);
}

}  // namespace
}  // namespace depengine::internal
