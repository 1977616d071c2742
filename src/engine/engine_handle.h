// EngineHandle: the Engine that CreateEngine returns. It owns its engine's
// core (a ThreadedEngine: tracker, pools, failures, profiler) through a
// shared_ptr, so that the core can outlive the handle.
//
// Destroying an engine finishes its pushed work and joins its threads. A
// handle destroyed where that would wait for itself (on one of the core's
// own threads, inside one of its functions, or while a callback finishes
// one of them: typically a function's closure held the engine's last
// shared_ptr and dropped it as the function finished) hands the core to a
// thread of its own (named depengine/reap), which finishes the work and
// joins the workers once that function is done; the handle's destructor returns at once (a
// function that uses the engine after that must hold a reference of its
// own). Anywhere else the handle finishes the core's work first, while
// functions may still push through it, then destroys the core.
//
// Every member forwards to the core; the core is what vars, operators and
// engine-made callbacks name (Var::engine, CallbackOnComplete's engine).
#pragma once

#include <memory>

#include "engine/threaded_engine.h"

namespace depengine::internal {

class EngineHandle final : public Engine {
 public:
  explicit EngineHandle(std::unique_ptr<ThreadedEngine> core) : core_(std::move(core)) {}
  ~EngineHandle() override;
  EngineHandle(const EngineHandle&) = delete;
  EngineHandle& operator=(const EngineHandle&) = delete;

  ThreadedEngine& core() const { return *core_; }

  void NotifyShutdown() override { core_->NotifyShutdown(); }
  VarHandle NewVariable() override { return core_->NewVariable(); }
  OprHandle NewOperator(AsyncFn fn, const std::vector<VarHandle>& const_vars,
                        const std::vector<VarHandle>& mutable_vars, FnProperty prop,
                        const char* opr_name) override {
    return core_->NewOperator(std::move(fn), const_vars, mutable_vars, prop, opr_name);
  }
  void DeleteOperator(OprHandle op) override { core_->DeleteOperator(op); }
  void Push(OprHandle op, Context exec_ctx, int priority, bool profiling) override {
    core_->Push(op, exec_ctx, priority, profiling);
  }
  void PushAsync(AsyncFn exec_fun, Context exec_ctx, const std::vector<VarHandle>& const_vars,
                 const std::vector<VarHandle>& mutable_vars, FnProperty prop, int priority,
                 const char* opr_name) override {
    core_->PushAsync(std::move(exec_fun), exec_ctx, const_vars, mutable_vars, prop, priority,
                     opr_name);
  }
  void DeleteVariable(SyncFn delete_fn, Context exec_ctx, VarHandle var) override {
    core_->DeleteVariable(std::move(delete_fn), exec_ctx, var);
  }
  void WaitForVar(VarHandle var) override { core_->WaitForVar(var); }
  void WaitForAll() override { core_->WaitForAll(); }

 protected:
  void PushSyncImpl(SyncFn exec_fn, Context exec_ctx, const std::vector<VarHandle>& const_vars,
                    const std::vector<VarHandle>& mutable_vars, FnProperty prop, int priority,
                    const char* opr_name) override {
    core_->PushSyncFrom(&exec_fn, exec_ctx, const_vars, mutable_vars, prop, priority, opr_name);
  }
  void RecordCallbackError(std::exception_ptr error) override {
    core_->RecordCallbackError(std::move(error));
  }

 private:
  // Set by the constructor; moved to the reaper thread, or reset, by the
  // destructor only. Other threads read it concurrently only through calls
  // made while the handle is alive (functions pushing during Drain
  // included); the reset comes after Drain returns, and after the move to
  // the reaper nothing may use the handle.
  std::shared_ptr<ThreadedEngine> core_;
};

// The core behind an engine of this library (a handle or a core), or
// nullptr for an Engine implemented elsewhere.
ThreadedEngine* CoreOf(Engine* engine);

}  // namespace depengine::internal
