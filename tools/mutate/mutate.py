#!/usr/bin/env python3
"""Mutation checks of the test suite: plants one bug at a time in the engine
and checks that ctest fails (docs/reliability.md, "Mutation checks of the
test suite").

Each mutation is a one-line edit of the library's source. The script works
in a git worktree of HEAD of its own (never in your checkout), builds it in
Release with the tests (no benchmarks, no operator layer), and for each
mutation: applies it, builds, runs ctest until the first failure, and puts
the source back. A mutation whose text no longer matches the source is
reported as stale: update it with the code it names.

Usage: tools/mutate/mutate.py [--list] [--keep] [--worktree DIR] [NAME...]
  NAME       run only these mutations (default: all)
  --list     print the mutations and exit
  --worktree where to build (default: a new directory under /tmp)
  --keep     leave the worktree and its build in place

Exit status: 0 when every mutation was caught, 1 when one survived, was
stale or did not build, 2 on bad usage. About 1-2 minutes a mutation on the
2-core machine; not part of CI.
"""
import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

# name: (file, text, replacement, what it breaks)
MUTATIONS = {
    "grant_past_fifo": (
        "src/tracker/var.cc",
        "if (queue_head != nullptr || write_running ||",
        "if (write_running ||",
        "a use granted at once past a non-empty FIFO",
    ),
    "write_during_reads": (
        "src/tracker/var.cc",
        " || (slot->write() && running_reads > 0)) return false;",
        ") return false;",
        "a write granted at once while reads run",
    ),
    "group_counts_one": (
        "src/tracker/var.cc",
        "running_reads += static_cast<int>(group->size);",
        "running_reads += 1;",
        "a group of queued reads counted as one running read",
    ),
    "inbox_ahead_of_fifo": (
        "src/tracker/var.cc",
        "      queue_tail->set_next(inbox_head);\n    }\n    queue_tail = inbox_tail;",
        "      inbox_tail->set_next(queue_head);\n      queue_head = inbox_head;\n"
        "      inbox_tail = queue_tail;\n    }\n    queue_tail = inbox_tail;",
        "the inbox put ahead of the FIFO instead of behind it",
    ),
    "queued_write_during_reads": (
        "src/tracker/var.cc",
        "      if (running_reads > 0) break;\n      write_running = true;",
        "      write_running = true;",
        "a queued write granted while reads run",
    ),
    "skip_passes_nothing": (
        "src/engine/threaded_engine.cc",
        "gate.Completing([&] { Complete(b, f); });  // skipped",
        "gate.Completing([&] { Complete(b, nullptr); });  // skipped",
        "a skipped function passes no failure on",
    ),
    "internal_kinds_skipped": (
        "src/engine/threaded_engine.cc",
        "if (b->kind == OprKind::kUser && failed_var_count_",
        "if (failed_var_count_",
        "deletions and waits skipped on a failed var",
    ),
    "priority_reversed": (
        "src/exec/task_queue.cc",
        "return a->priority < b->priority; }",
        "return a->priority > b->priority; }",
        "priorities reversed in the ready heap",
    ),
    "waitforvar_not_delivered": (
        "src/engine/threaded_engine_waits.cc",
        "  FailurePtr f = TakeFailure(v);\n  if (f) f->delivered.store(true, std::memory_order_relaxed);",
        "  FailurePtr f = TakeFailure(v);",
        "WaitForVar's failure not marked delivered",
    ),
    "waitforall_keeps_failures": (
        "src/engine/threaded_engine_waits.cc",
        "    for (Var* v : failed_vars_) TakeFailure(v);\n",
        "",
        "WaitForAll leaves the vars failed",
    ),
    "limiter_one_more": (
        "src/engine/in_flight_limiter.cc",
        "if (static_cast<std::int64_t>(r - seen) < static_cast<std::int64_t>(max_)) {",
        "if (static_cast<std::int64_t>(r - seen) <= static_cast<std::int64_t>(max_)) {",
        "backpressure admits one function more than max_in_flight",
    ),
    "async_queued": (
        "src/engine/per_device_engine.cc",
        "    if (prop == FnProperty::kAsync) return nullptr;\n",
        "",
        "kAsync functions sent to a pool",
    ),
    "delete_not_ahead": (
        "src/engine/threaded_engine.cc",
        'kMaxPriority + 1, "DeleteVariable"',
        '0, "DeleteVariable"',
        "deletions queued at priority 0",
    ),
    "copy_to_normal_pool": (
        "src/engine/per_device_engine.cc",
        "return PoolFor(copy ? kGpuCopy : kGpuNormal, ctx.dev_id);",
        "return PoolFor(kGpuNormal, ctx.dev_id);",
        "GPU copies sent to the GPU's normal pool",
    ),
    "priority_pool_unused": (
        "src/engine/per_device_engine.cc",
        "return prop == FnProperty::kCPUPrioritized ? PriorityPool() : PoolFor(kCpuNormal, ctx.dev_id);",
        "return PoolFor(kCpuNormal, ctx.dev_id);",
        "kCPUPrioritized sent to the normal pool",
    ),
    "sleep_without_recheck": (
        "src/exec/task_queue.cc",
        "if (Empty() && !stop_.load(std::memory_order_seq_cst)) sleep_cv_.wait(lock);",
        "if (!stop_.load(std::memory_order_seq_cst)) sleep_cv_.wait(lock);",
        "a worker sleeps without looking at the queue after it registered",
    ),
    "single_push_wakes_nobody": (
        "src/exec/task_queue.cc",
        "  if (n == 1) {\n    WakeIfNobodySpins();\n  } else if",
        "  if (n == 1) {\n  } else if",
        "a single ready block wakes no sleeping worker",
    ),
    "callback_twice_allowed": (
        "src/engine/threaded_engine.cc",
        "  if (!b->ticket.compare_exchange_strong(expected, expected + 1, std::memory_order_acq_rel)) {\n"
        "    throw std::logic_error(",
        "  if (!b->ticket.compare_exchange_strong(expected, expected + 1, std::memory_order_acq_rel)) {\n"
        "    return;\n    throw std::logic_error(",
        "a callback called a second time is ignored instead of rejected",
    ),
    "wait_from_inside_allowed": (
        "src/engine/threaded_engine_waits.cc",
        "  if (OnOwnThread()) {\n    throw std::logic_error(std::string(call) +",
        "  if (false) {\n    throw std::logic_error(std::string(call) +",
        "a wait from inside a function of the same engine is not rejected",
    ),
    "var_in_both_lists_merged": (
        "src/tracker/var_list_sort.cc",
        "      if (keys[out - 1] != keys[k] && var_bits != 0) ThrowVarInBothLists(call);\n      continue;",
        "      continue;",
        "a var in both const_vars and mutable_vars merged silently (long lists)",
    ),
    "pushed_after_delete_accepted": (
        "src/engine/threaded_engine.cc",
        "if (op->pushed.fetch_add(1, std::memory_order_acq_rel) & Opr::kDeleteRequested) {",
        "if (op->pushed.fetch_add(1, std::memory_order_acq_rel) & 0) {",
        "a push of a deleted operator is accepted",
    ),
    "waitforvar_as_read": (
        "src/engine/threaded_engine_waits.cc",
        "PushOneShot(&wake, nullptr, Context::CPU(), {}, VarList(&var, 1), FnProperty::kAsync",
        "PushOneShot(&wake, nullptr, Context::CPU(), VarList(&var, 1), {}, FnProperty::kAsync",
        "WaitForVar waits as a read (not for earlier reads)",
    ),
    "waitforvar_idle_always": (
        "src/engine/threaded_engine_waits.cc",
        "    idle = var->IdleLocked();",
        "    idle = true;",
        "WaitForVar returns at once, whatever uses the var",
    ),
    "drain_one_generation": (
        "src/engine/threaded_engine_lifetime.cc",
        "    if (pending_[0].load(std::memory_order_seq_cst) == 0 &&\n"
        "        pending_[1].load(std::memory_order_seq_cst) == 0) {",
        "    if (true) {",
        "destruction waits for one generation only (not for functions pushed meanwhile)",
    ),
    "delete_operator_frees_early": (
        "src/engine/threaded_engine_lifetime.cc",
        "  FinishPushes(op, Opr::kDeleteRequested - counted);\n}",
        "  (void)counted;\n  FreeOpr(op);\n}",
        "DeleteOperator frees the operator before its pending pushes finish",
    ),
    "inside_body_completion_batched": (
        "src/engine/threaded_engine.cc",
        "    if (tls_may_continue) [[likely]] {",
        "    if (true) [[likely]] {",
        "a completion inside a running body counted late (batched)",
    ),
    "inflight_function_waits": (
        "src/engine/threaded_engine.cc",
        "engine_->in_flight_.Reserve(may_wait && !engine_->OnOwnThread() && !own_worker);",
        "engine_->in_flight_.Reserve(may_wait);",
        "a push from inside the engine waits for room under backpressure",
    ),
    "inflight_worker_waits": (
        "src/engine/threaded_engine.cc",
        "engine_->in_flight_.Reserve(may_wait && !engine_->OnOwnThread() && !own_worker);",
        "engine_->in_flight_.Reserve(may_wait && !engine_->OnOwnThread());",
        "a push from a worker outside a function (a closure's destructor) waits for room",
    ),
    "inflight_released_late": (
        "src/engine/threaded_engine.cc",
        "  if (in_flight_.enabled()) ReleaseInFlight();\n  ReleaseExecution(b);",
        "  ReleaseExecution(b);\n  if (in_flight_.enabled()) ReleaseInFlight();",
        "backpressure's unit released after the closure is destroyed",
    ),
    "callback_error_dropped": (
        "src/engine/threaded_engine.cc",
        "  Complete(b, error ? RecordFailure(error) : nullptr);\n}",
        "  (void)error;\n  Complete(b, nullptr);\n}",
        "an error passed to a callback outside the body dropped",
    ),
    "inline_callback_error_dropped": (
        "src/engine/threaded_engine.cc",
        "    running->error = std::move(error);",
        "    (void)error;",
        "an error passed to a callback inside the body dropped",
    ),
    "throw_after_inline_callback_only_logged": (
        "src/engine/threaded_engine.cc",
        "      if (!inline_completion.error) {\n        inline_completion.error = error;",
        "      if (false) {\n        inline_completion.error = error;",
        "a body that calls its callback and then throws does not fail its vars",
    ),
    "skip_on_failed_write_only": (
        "src/engine/threaded_engine_waits.cc",
        "    if (s.var->failure) return s.var->failure;",
        "    if (s.write() && s.var->failure) return s.var->failure;",
        "a function that only reads a failed var is not skipped",
    ),
    "skip_checks_first_var": (
        "src/engine/threaded_engine_waits.cc",
        "    if (s.var->failure) return s.var->failure;\n  }",
        "    if (s.var->failure) return s.var->failure;\n    break;\n  }",
        "only a function's first var is checked for a failure",
    ),
    "scratch_var_fails": (
        "src/engine/threaded_engine.cc",
        "const bool fail_var = failure && !s.var->scratch.load(std::memory_order_relaxed);",
        "const bool fail_var = failure != nullptr;",
        "a failure recorded on a scratch var (a resource)",
    ),
    "delete_as_read": (
        "src/engine/threaded_engine.cc",
        "PushOneShot(&delete_fn, nullptr, exec_ctx, {}, VarList(&var, 1), FnProperty::kNormal,",
        "PushOneShot(&delete_fn, nullptr, exec_ctx, VarList(&var, 1), {}, FnProperty::kNormal,",
        "DeleteVariable pushed as a read (runs beside earlier reads)",
    ),
    "waitforall_others_unreported": (
        "src/engine/threaded_engine_waits.cc",
        "  if (!others.empty() && !shutdown_notified_.load(std::memory_order_relaxed)) {",
        "  if (false) {",
        "failures WaitForAll cannot rethrow not named on stderr",
    ),
    "destroyed_failures_unreported": (
        "src/engine/threaded_engine_lifetime.cc",
        "    if (!undelivered.empty() && !shutdown_notified_.load(std::memory_order_relaxed)) {",
        "    if (false) {",
        "failures never delivered not named when the engine is destroyed",
    ),
    "pooled_copy_to_normal": (
        "src/engine/pooled_engine.cc",
        "        DispatchToPool(b, copy_.get());",
        "        DispatchToPool(b, normal_.get());",
        "the pooled engine's copies sent to its normal queue",
    ),
    "pooled_async_queued": (
        "src/engine/pooled_engine.cc",
        "      case FnProperty::kAsync:\n        RunInline(b);\n        return;\n",
        "",
        "the pooled engine's kAsync functions sent to its normal queue",
    ),
    "env_alias_rejected": (
        "src/engine/engine_options.cc",
        'type == "ThreadedEnginePooled" || type == "ThreadedEngine"',
        'type == "ThreadedEnginePooled"',
        "DEPENGINE_ENGINE_TYPE=ThreadedEngine (MXNet's alias) rejected",
    ),
    "worker_count_ignored": (
        "src/engine/per_device_engine.cc",
        "threads = o.cpu_worker_threads > 0 ? o.cpu_worker_threads : DefaultCpuWorkers();",
        "threads = DefaultCpuWorkers();",
        "cpu_worker_threads ignored by the per-device engine",
    ),
    "priority_threads_ignored": (
        "src/engine/per_device_engine.cc",
        "const int n = options().cpu_priority_threads > 0 ? options().cpu_priority_threads : 2;",
        "const int n = 2;",
        "cpu_priority_threads ignored",
    ),
    "negative_priority_in_fifo": (
        "src/exec/task_queue.cc",
        "  if (b->priority == 0) {\n    if (b->profile",
        "  if (b->priority <= 0) {\n    if (b->profile",
        "a single ready block of negative priority queued with priority 0",
    ),
    "taker_wakes_nobody": (
        "src/exec/task_queue.h",
        "        if (!EmptyHint()) WakeIfNobodySpins();",
        "",
        "a worker that takes a block and leaves more behind wakes no sleeper",
    ),
    "graph_war_missing": (
        "src/profiler/graph_writer.cc",
        '          if (rd != i) edges.push_back({rd, i, v, "WAR"});',
        "          (void)rd;",
        "the dependency graph leaves out write-after-read edges",
    ),
    "graph_waw_beside_war": (
        "src/profiler/graph_writer.cc",
        "      } else if (s.last_writer >= 0) {",
        "      }\n      if (s.last_writer >= 0) {",
        "the dependency graph adds a write-after-write edge implied by its reads",
    ),
    "graph_shortest_path": (
        "src/profiler/graph_writer.cc",
        "if (dist[edges[e].from] > best) {",
        "if (best == 0 || dist[edges[e].from] < best) {",
        "the dependency graph's critical path takes the shortest chain",
    ),
    "trace_dur_from_origin": (
        "src/profiler/trace_writer.cc",
        '",\\"dur\\":" << Us(r.end_ns - r.start_ns)',
        '",\\"dur\\":" << Us(r.end_ns - origin_ns)',
        "the trace's durations measured from the trace's start",
    ),
    "watchdog_silent": (
        "src/engine/watchdog.cc",
        "if (age < limit_ || e.reported) continue;",
        "if (true || e.reported) continue;",
        "the watchdog never reports a function running past its limit",
    ),
    "completer_sleep_ignores_signal": (
        "src/gpu/completer.cc",
        "return !added_.empty() || signaled_ || stop_;",
        "return !added_.empty() || stop_;",
        "the completer of async GPU functions sleeps through a stream callback's wake-up",
    ),
    # Third round (thirty-sixth session): the tracker's push side, the var
    # list's sort and merge, the continuation's priority, and the waiter's
    # wake-up.
    "reads_granted_during_write": (
        "src/tracker/var.cc",
        "while (s != nullptr && !write_running) {",
        "while (s != nullptr) {",
        "queued reads granted from the FIFO while a write runs",
    ),
    "inbox_flag_not_set": (
        "src/tracker/var.cc",
        "  inbox_len = 1;\n  inbox_pending.store(true, std::memory_order_seq_cst);",
        "  inbox_len = 1;",
        "a slot that starts the inbox does not flag it for the completion",
    ),
    "settle_skips_inbox": (
        "src/tracker/var.cc",
        "    PullInboxLocked();\n    if (queue_head == nullptr) return;",
        "    return;",
        "a completion that finds the FIFO empty leaves the flagged inbox unpulled",
    ),
    "single_push_ahead_of_inbox": (
        "src/tracker/var.cc",
        "  if (inbox_pending.load(std::memory_order_acquire)) PullInboxLocked();",
        "",
        "a one-var push queued ahead of earlier pushes still in the inbox",
    ),
    "group_over_capacity": (
        "src/tracker/var.cc",
        "if (group->size < internal::ReaderGroup::kCapacity) {",
        "if (group->size <= internal::ReaderGroup::kCapacity) {",
        "a ReaderGroup filled one owner past its array",
    ),
    "three_var_duplicates_kept": (
        "src/tracker/var_list_sort.cc",
        "if (((a ^ b) & kVarBits) != 0 && ((b ^ c) & kVarBits) != 0) return 3;",
        "if (((a ^ b) & kVarBits) != 0 || ((b ^ c) & kVarBits) != 0) return 3;",
        "a three-var list with a var listed twice kept as three slots",
    ),
    "long_list_left_unsorted": (
        "src/tracker/var_list_sort.cc",
        "      if (k - j > budget) {\n        std::sort(keys, keys + n);\n        break;",
        "      if (k - j > budget) {\n        break;",
        "a long var list out of order left half sorted when insertion runs out of budget",
    ),
    "continuation_not_promoted": (
        "src/engine/threaded_engine.cc",
        "    if (continuation != nullptr) PromoteMostUrgent();",
        "",
        "a more urgent block made ready beside the continuation does not run first",
    ),
    "bypass_ignores_heap": (
        "src/exec/task_queue.h",
        "    if (priority < heap_max_.load(std::memory_order_relaxed)) return false;\n",
        "",
        "a continuation runs ahead of a queued block of higher priority",
    ),
    "idle_waiter_not_woken": (
        "src/engine/threaded_engine_waits.cc",
        "  if (before == n && idle_waiters_.load(std::memory_order_seq_cst) > 0) {",
        "  if (before == n && idle_waiters_.load(std::memory_order_seq_cst) > 1) {",
        "the last completion wakes no WaitForAll that went to sleep",
    ),
    # Fourth round (thirty-sixth session): deletion's window, failure
    # delivery and its summary, the profiler's waits.
    "single_push_after_delete_accepted": (
        "src/tracker/var.cc",
        "  if (deleted.load(std::memory_order_relaxed)) {",
        "  if (false) {",
        "a one-var push behind a pending DeleteVariable accepted",
    ),
    "general_push_after_delete_accepted": (
        "src/engine/threaded_engine.cc",
        "    if (v->deleted.load(std::memory_order_relaxed)) [[unlikely]] {",
        "    if (false) [[unlikely]] {",
        "a several-var push (or a second DeleteVariable) behind a pending DeleteVariable accepted",
    ),
    "delivered_failure_kept_on_var": (
        "src/engine/threaded_engine_waits.cc",
        "    f = std::move(v->failure);\n    v->failure.reset();",
        "    f = v->failure;",
        "WaitForVar rethrows a failure but leaves it on the var",
    ),
    "undelivered_summary_unbounded": (
        "src/engine/threaded_engine_waits.cc",
        "    if (i == kNamed) {",
        "    if (i == kNamed + 1000000) {",
        "a storm of failures WaitForAll cannot rethrow named one by one on stderr",
    ),
    "stats_wait_from_push": (
        "src/profiler/stats_writer.cc",
        "a.wait_us.push_back(static_cast<double>(r->start_ns - r->ready_ns) / 1000.0);",
        "a.wait_us.push_back(static_cast<double>(r->start_ns - r->push_ns) / 1000.0);",
        "the stats' queue wait counted from the push (dependency wait included)",
    ),
    "trace_dependency_wait_to_start": (
        "src/profiler/trace_writer.cc",
        "<< \",\\\"dependency_wait_us\\\":\" << Us(r->ready_ns - r->push_ns)",
        "<< \",\\\"dependency_wait_us\\\":\" << Us(r->start_ns - r->push_ns)",
        "the trace's dependency wait counted to the start (queue wait included)",
    ),
    # Fifth round (thirty-sixth session): the options' parsing and the
    # GPU pools' sizes, and backpressure's count of pushes that never wait.
    "env_too_large_wraps": (
        "src/engine/engine_options.cc",
        "if (errno == ERANGE || v > static_cast<unsigned long long>(max)) {",
        "if (errno == ERANGE) {",
        "an environment count too large for its option wraps instead of being rejected",
    ),
    "env_not_trimmed": (
        "src/engine/engine_options.cc",
        "  while (!v.empty() && blank(v.back())) v.pop_back();\n",
        "",
        "an environment value with trailing blanks rejected",
    ),
    "watchdog_negative_accepted": (
        "src/engine/engine_options.cc",
        "if (*end != '\\0' || !(o.watchdog_seconds >= 0)) {",
        "if (*end != '\\0') {",
        "DEPENGINE_WATCHDOG_SECONDS below 0 (or nan) accepted",
    ),
    "inside_push_uncounted": (
        "src/engine/in_flight_limiter.cc",
        "    reserved_.fetch_add(1, std::memory_order_relaxed);\n    return;",
        "    return;",
        "backpressure does not count the pushes that may not wait (from inside functions)",
    ),
    "gpu_worker_count_ignored": (
        "src/engine/per_device_engine.cc",
        "threads = o.gpu_worker_threads > 0 ? o.gpu_worker_threads : 2;",
        "threads = 2;",
        "gpu_worker_threads ignored",
    ),
    "gpu_copy_count_ignored": (
        "src/engine/per_device_engine.cc",
        "threads = o.gpu_copy_threads > 0 ? o.gpu_copy_threads : 1;",
        "threads = 1;",
        "gpu_copy_threads ignored",
    ),
    # Sixth round (thirty-sixth session): the watchdog's report, and what
    # NotifyShutdown silences.
    "watchdog_reports_again": (
        "src/engine/watchdog.cc",
        "if (age < limit_ || e.reported) continue;",
        "if (age < limit_) continue;",
        "the watchdog reports a long-running function again at every scan",
    ),
    "watchdog_writes_shown_as_reads": (
        "src/engine/watchdog.cc",
        "const std::string reads = Labels(r.reads), writes = Labels(r.writes);",
        "const std::string reads = Labels(r.reads), writes = Labels(r.reads);",
        "the watchdog's report names the vars a function reads as those it writes",
    ),
    "waitforall_reports_after_shutdown_notice": (
        "src/engine/threaded_engine_waits.cc",
        "  if (!others.empty() && !shutdown_notified_.load(std::memory_order_relaxed)) {",
        "  if (!others.empty()) {",
        "WaitForAll still names undelivered failures on stderr after NotifyShutdown",
    ),
    # Seventh round (thirty-seventh session): the pools' address-ordered
    # stock.
    "stock_handed_out_descending": (
        "src/common/object_pool.h",
        "for (std::size_t i = 0; i < n; ++i) out[n - 1 - i] = static_cast<T*>(taken[i]);",
        "for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T*>(taken[i]);",
        "a batch from the stock allocated from its highest address down",
    ),
    "burst_never_ordered": (
        "src/common/object_pool.h",
        "      if (!kOrderBursts || free_objects.size() <= kRecentMax) return;",
        "      return;",
        "a burst's objects stay on the stack in the order they were freed",
    ),
    "order_bursts_flag_ignored": (
        "src/common/object_pool.h",
        "      if (!kOrderBursts || free_objects.size() <= kRecentMax) return;",
        "      if (free_objects.size() <= kRecentMax) return;",
        "a pool whose Layout keeps bursts on the stack puts them in address order anyway",
    ),
    "stock_scan_skips_rest_of_word": (
        "src/common/address_ordered_stock.h",
        "      r.first_word = w;",
        "      r.first_word = w + 1;",
        "a Take that stops inside a word skips that word's other objects for good",
    ),
    "stock_put_below_scan_lost": (
        "src/common/address_ordered_stock.h",
        "    r.first_word = std::min(r.first_word, word);",
        "",
        "an object put below the scan's position in its region is never found",
    ),
    # The ticket design's parts (bench/experiments/tickets/; their tests are
    # in tests/experiments/ and build with the suite).
    "heavy_barrier_only_a_fence": (
        "bench/experiments/tickets/asymmetric_barrier.cc",
        "    if (Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;",
        "    SeqCstFence();\n    if (errno != -1) return;",
        "the heavy side of the asymmetric barrier a fence of its own thread only",
    ),
    "ring_no_clear_ahead": (
        "bench/experiments/tickets/cell_ring.h",
        "    if (index + n < segment_cells_) ClearWord(HeaderAt(tail_seg_, index + n));",
        "",
        "the cell after an entry keeps its old bytes until its own entry is published",
    ),
    "waker_epoch_after_announce": (
        "bench/experiments/tickets/cell_ring.h",
        "    const std::uint32_t epoch = epoch_.load(std::memory_order_seq_cst);  // (0)\n"
        "    sleeping_.store(1, std::memory_order_release);                       // (1)\n"
        "    HeavyBarrier();                                                      // (2)\n"
        "    if (after_announce_for_testing_ != nullptr) after_announce_for_testing_(hook_arg_);\n",
        "    sleeping_.store(1, std::memory_order_release);                       // (1)\n"
        "    HeavyBarrier();                                                      // (2)\n"
        "    if (after_announce_for_testing_ != nullptr) after_announce_for_testing_(hook_arg_);\n"
        "    const std::uint32_t epoch = epoch_.load(std::memory_order_seq_cst);  // (0)\n",
        "the consumer reads the futex word after announcing its sleep (the lost wake-up fixed in "
        "the thirty-eighth session)",
    ),
}


def run(cmd, cwd, log):
    return subprocess.run(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT).returncode


def first_failures(log_text):
    return [line.split(" - ", 1)[1].split("  #")[0].split(" (")[0]
            for line in log_text.splitlines()
            if line.startswith("\t") and " - " in line and "(Skipped)" not in line]


def main():
    parser = argparse.ArgumentParser(add_help=True, description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--worktree")
    args = parser.parse_args()
    if args.list:
        for name, (path, _, _, what) in MUTATIONS.items():
            print(f"{name:28} {path:36} {what}")
        return 0
    unknown = [n for n in args.names if n not in MUTATIONS]
    if unknown:
        print(f"mutate.py: unknown mutation(s): {', '.join(unknown)} (--list names them)",
              file=sys.stderr)
        return 2
    names = args.names or list(MUTATIONS)

    repo = pathlib.Path(__file__).resolve().parents[2]
    tree = pathlib.Path(args.worktree or tempfile.mkdtemp(prefix="depengine-mutate-"))
    logs = tree / "mutation-logs"
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()
    if not (tree / ".git").exists():
        subprocess.run(["git", "worktree", "add", "--detach", "-f", str(tree), head],
                       cwd=repo, check=True, capture_output=True)
    else:
        # A worktree left by an earlier run (--worktree): bring it to HEAD, so
        # that the mutations are tried on the code as it is now.
        subprocess.run(["git", "checkout", "--detach", "-f", head], cwd=tree, check=True,
                       capture_output=True)
    logs.mkdir(exist_ok=True)
    with open(logs / "configure.log", "w") as log:
        if run(["cmake", "-S", ".", "-B", "build", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                "-DDEPENGINE_BUILD_BENCH=OFF", "-DDEPENGINE_OPS=OFF"], tree, log) != 0 or \
           run(["ninja", "-C", "build"], tree, log) != 0:
            print(f"mutate.py: the unmutated tree does not build; see {logs}/configure.log")
            return 1

    bad = 0
    for name in names:
        path, text, replacement, what = MUTATIONS[name]
        source = tree / path
        original = source.read_text()
        if original.count(text) != 1:
            print(f"STALE     {name}: its text is not in {path} exactly once; update the mutation")
            bad += 1
            continue
        start = time.time()
        source.write_text(original.replace(text, replacement))
        try:
            with open(logs / f"{name}.log", "w") as log:
                if run(["ninja", "-C", "build"], tree, log) != 0:
                    print(f"NO BUILD  {name}: see {logs}/{name}.log")
                    bad += 1
                    continue
                result = subprocess.run(
                    ["ctest", "--test-dir", "build", "-j2", "--timeout", "30",
                     "--stop-on-failure", "--output-on-failure", "-E", "install|readme"],
                    cwd=tree, capture_output=True, text=True)
                log.write(result.stdout + result.stderr)
            seconds = time.time() - start
            if result.returncode == 0:
                print(f"SURVIVED  {name} ({what}): every test passed, {seconds:.0f} s")
                bad += 1
            else:
                failed = first_failures(result.stdout)
                print(f"caught    {name} ({what}) by {', '.join(failed[:3]) or 'ctest'}, "
                      f"{seconds:.0f} s")
        finally:
            source.write_text(original)
    # Leave the build matching the source.
    with open(logs / "restore.log", "w") as log:
        run(["ninja", "-C", "build"], tree, log)
    if not args.keep and not args.worktree:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=repo,
                       capture_output=True)
        shutil.rmtree(tree, ignore_errors=True)
    else:
        print(f"worktree and logs kept in {tree}")
    print(f"{len(names) - bad} of {len(names)} mutations caught")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
