#include <gtest/gtest.h>
#include "depengine/engine.h"
using namespace depengine;
TEST(Smoke, Chain) {
  for (auto kind : {EngineKind::kNaive, EngineKind::kPooled, EngineKind::kPerDevice}) {
    EngineOptions o; o.kind = kind; o.cpu_worker_threads = 2;
    auto e = CreateEngine(o);
    auto v = e->NewVariable();
    long counter = 0;
    for (int i = 0; i < 100000; ++i) e->PushSync([&](RunContext) { ++counter; }, Context::CPU(), {}, {v});
    e->WaitForAll();
    EXPECT_EQ(counter, 100000);
    e->DeleteVariable(nullptr, Context::CPU(), v);
    e->WaitForAll();
  }
}
