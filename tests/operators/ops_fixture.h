// A fixture that runs a test on each engine kind with two CPU workers, and
// owns a ResourceManager on that engine.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "depengine/engine.h"
#include "depengine/parameter.h"
#include "depengine/resource.h"

namespace depengine::test {

class EngineTest : public ::testing::TestWithParam<EngineKind> {
 protected:
  void SetUp() override {
    EngineOptions o;
    o.kind = GetParam();
    o.cpu_worker_threads = 2;
    engine_ = CreateEngine(o);
    ResourceOptions ro;
    ro.seed = 7;
    resources_ = std::make_unique<ResourceManager>(engine_.get(), ro);
  }
  void TearDown() override {
    // Arrays made in the test body are gone by now; their storage is freed
    // by the engine once their functions finish.
    resources_.reset();
    engine_->WaitForAll();
    engine_.reset();
  }
  Engine* engine() const { return engine_.get(); }
  ResourceManager* resources() const { return resources_.get(); }

 private:
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ResourceManager> resources_;
};

// The one parameter of the tests' deliberately faulty operators: `mode`
// names the mistake the operator makes ("ok": none). Each such operator
// lists its modes where it is defined.
struct ModeParam {
  std::string mode;
  static const ParamSchema<ModeParam>& Schema() {
    static const ParamSchema<ModeParam> s = [] {
      ParamSchema<ModeParam> s;
      s.Field("mode", &ModeParam::mode).set_default("ok");
      return s;
    }();
    return s;
  }
};

// The message of the exception of type E that f() raises, or a note that
// it raised none of that type (so that EXPECT_THAT(..., HasSubstr(...))
// reports what happened).
template <class E, class F>
std::string Raised(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "nothing of the expected type was raised";
}

inline std::string EngineKindParamName(const ::testing::TestParamInfo<EngineKind>& info) {
  return EngineKindName(info.param);
}

#define DEPENGINE_INSTANTIATE_ENGINE_TEST(Suite)                                           \
  INSTANTIATE_TEST_SUITE_P(                                                                \
      AllEngines, Suite,                                                                   \
      ::testing::Values(::depengine::EngineKind::kNaive, ::depengine::EngineKind::kPooled, \
                        ::depengine::EngineKind::kPerDevice),                              \
      ::depengine::test::EngineKindParamName)

}  // namespace depengine::test
