// The profiler: a timeline of the functions an engine ran (Chrome trace
// event format, opens in Perfetto and chrome://tracing), per-function
// statistics, and the dependency graph of the recorded window (Graphviz DOT).
//
// Recording is per engine. It covers every function while turned on with
// SetProfiling (or for every engine made from EngineOptions::FromEnv() when
// DEPENGINE_PROFILE=path.json is set: the trace is written to that path when
// the engine is destroyed, at process exit for Engine::Get(); engines that
// share the path share the file, one trace process each), and the single
// pushes made with Push(..., profiling = true). Workers record into
// per-thread buffers; nothing is locked on the hot path. When off, the cost
// is one relaxed load per push.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "depengine/engine.h"

namespace depengine {

// Turns recording of every function on `engine` on or off. Callable from
// any thread; functions pushed while it is on are recorded.
void SetProfiling(Engine& engine, bool on);

// Whether SetProfiling(engine, true) is in effect.
bool IsProfiling(const Engine& engine);

// Writes the functions recorded so far, finished ones only, as a Chrome
// trace (JSON) to `path`. Raises std::runtime_error when the file cannot be
// written (the three dumps' messages name the path and the system's reason,
// e.g. "No such file or directory"). Call after WaitForAll for a complete
// picture.
void DumpProfile(Engine& engine, const std::string& path);

// Per function name: count, total, mean, p50, p99 and max of run time and
// of queue wait (time from ready to start), in microseconds. Writes a
// Markdown table to `table` (in decimal, 3 decimals; the stream's format
// flags and precision are left as they were; a '|' in a name is written
// "\|" and a line break as a space) and, when `json_path` is not empty, the
// same as JSON (the same numbers, 3 decimals). Raises std::runtime_error
// when the JSON file cannot be written.
void DumpProfileStats(Engine& engine, std::ostream& table, const std::string& json_path = "");

// The dependency graph of the recorded functions, in push order: nodes are
// functions, edges carry the var and the kind (RAW read-after-write, WAR
// write-after-read, WAW write-after-write); the critical path (longest chain
// of run times) is drawn in red. Writes Graphviz DOT to `path`. Raises
// std::runtime_error when the file cannot be written.
void DumpDependencyGraph(Engine& engine, const std::string& path);

// Names `var` in this engine's dumps: the trace's reads, writes and
// dependency arrows, WaitForVar's row, and the dependency graph's edges
// show `name` instead of "v<number>". Takes effect at the next dump, for
// the functions recorded before the call too; an empty name restores the
// number. Kept after the var is deleted (the dumps still show the
// functions that used it) and by ClearProfile. Any characters: the dumps
// escape them. Raises std::invalid_argument for a null var, a var of
// another engine, or one that was deleted.
void SetVarName(Engine& engine, VarHandle var, const std::string& name);

// Forgets what was recorded so far.
void ClearProfile(Engine& engine);

// Number of functions recorded and finished so far.
std::size_t ProfiledFunctionCount(Engine& engine);

}  // namespace depengine
