// A shared library of the consumer's own that links the installed, static
// depengine: its objects must be position-independent for that.
#include <depengine/engine.h>

int RunInSharedLibrary() {
  using namespace depengine;
  EngineOptions options;
  options.kind = EngineKind::kPooled;
  options.cpu_worker_threads = 2;
  auto engine = CreateEngine(options);
  int a = 0, b = 0;
  VarHandle va = engine->NewVariable(), vb = engine->NewVariable();
  engine->PushSync([&](RunContext) { a = 2; }, Context::CPU(), {}, {va});
  engine->PushSync([&](RunContext) { b = a + 1; }, Context::CPU(), {va}, {vb});
  engine->WaitForVar(vb);
  engine->DeleteVariable(nullptr, Context::CPU(), va);
  engine->DeleteVariable(nullptr, Context::CPU(), vb);
  engine->WaitForAll();
  return b;
}
