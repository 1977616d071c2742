// A program built against an installed depengine, with find_package or
// with pkg-config: checks that the library it linked is the version of the
// headers it was compiled with, then runs the seed's first example on every
// engine kind and checks the result.
#include <depengine/engine.h>

#include <cstdio>
#include <cstring>

int main() {
  using namespace depengine;
  if (std::strcmp(LibraryVersion(), DEPENGINE_VERSION_STRING) != 0) {
    std::fprintf(stderr, "linked depengine %s, headers of %s\n", LibraryVersion(),
                 DEPENGINE_VERSION_STRING);
    return 1;
  }
  for (EngineKind kind : {EngineKind::kNaive, EngineKind::kPooled, EngineKind::kPerDevice}) {
    EngineOptions options;
    options.kind = kind;
    options.cpu_worker_threads = 2;
    auto engine = CreateEngine(options);
    int a = 0, b = 0, c = 0, d = 0;
    VarHandle va = engine->NewVariable(), vb = engine->NewVariable();
    VarHandle vc = engine->NewVariable(), vd = engine->NewVariable();
    engine->PushSync([&](RunContext) { a = 2; }, Context::CPU(), {}, {va});
    engine->PushSync([&](RunContext) { b = a + 1; }, Context::CPU(), {va}, {vb});
    engine->PushSync([&](RunContext) { c = a + 2; }, Context::CPU(), {va}, {vc});
    engine->PushAsync(
        [&](RunContext, CallbackOnComplete done) {
          d = b * c;
          done();
        },
        Context::CPU(), {vb, vc}, {vd});
    engine->WaitForVar(vd);
    for (VarHandle v : {va, vb, vc, vd}) engine->DeleteVariable(nullptr, Context::CPU(), v);
    engine->WaitForAll();
    if (d != 12) {
      std::fprintf(stderr, "%s: D = %d, expected 12\n", EngineKindName(kind), d);
      return 1;
    }
  }
  std::printf("consumer: ok\n");
  return 0;
}
