// The executor tests' fixture: EngineTest, and the ExecutorOptions that
// bind a graph on its engine and resources.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "depengine/executor.h"
#include "ops_fixture.h"

namespace depengine::test {

class ExecutorEngineTest : public EngineTest {
 protected:
  // Options on this test's engine and resources, with the arguments'
  // shapes and the element type.
  ExecutorOptions Options(std::map<std::string, TShape> shapes, int dtype = kFloat64) {
    ExecutorOptions o;
    o.engine = engine();
    o.resources = resources();
    o.dtype = dtype;
    o.arg_shapes = std::move(shapes);
    return o;
  }
};

}  // namespace depengine::test
