// include/depengine/profiler.h: the public calls, forwarded to the engine's
// Profiler.
#include <stdexcept>

#include "depengine/profiler.h"
#include "engine/engine_handle.h"
#include "engine/threaded_engine.h"

namespace depengine {
namespace {

internal::ThreadedEngine& Core(Engine& engine, const char* call) {
  internal::ThreadedEngine* core = internal::CoreOf(&engine);
  if (core == nullptr) throw std::invalid_argument(std::string(call) + ": not a depengine engine");
  return *core;
}

}  // namespace

void SetProfiling(Engine& engine, bool on) { Core(engine, "SetProfiling").SetProfileAll(on); }

bool IsProfiling(const Engine& engine) {
  return Core(const_cast<Engine&>(engine), "IsProfiling").ProfileAll();
}

void DumpProfile(Engine& engine, const std::string& path) {
  Core(engine, "DumpProfile").profiler().WriteTrace(path);
}

void DumpProfileStats(Engine& engine, std::ostream& table, const std::string& json_path) {
  Core(engine, "DumpProfileStats").profiler().WriteStats(table, json_path);
}

void DumpDependencyGraph(Engine& engine, const std::string& path) {
  Core(engine, "DumpDependencyGraph").profiler().WriteGraph(path);
}

void SetVarName(Engine& engine, VarHandle var, const std::string& name) {
  Core(engine, "SetVarName").NameVarInProfile(var, name);
}

void ClearProfile(Engine& engine) { Core(engine, "ClearProfile").profiler().Clear(); }

std::size_t ProfiledFunctionCount(Engine& engine) {
  return Core(engine, "ProfiledFunctionCount").profiler().Count();
}

}  // namespace depengine
