// Where functions run, and in which order the ready ones start
// (docs/guide.md, "Pools and priorities").
//
// 1. The FnProperty of a push picks the pool: kNormal the device's workers,
//    kCPUPrioritized the CPU priority pool, kAsync the thread that made the
//    function ready (no queue hop). Each function prints its thread's name,
//    which names its pool ("cpu/normal/0").
// 2. Among functions that are ready and waiting in one pool, a higher
//    priority starts first. To make several wait at once, the example keeps
//    the only worker of the pool busy on a gate (a function that waits until
//    main opens it: a way to stage the demonstration, not a way to write a
//    function), queues ten functions of mixed priorities, then opens it.
//
// Checks the start order and exits 1 if it is not by priority.
// Usage: priorities
#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "depengine/engine.h"

using namespace depengine;

namespace {

std::string ThreadName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  return name;
}

}  // namespace

int main() {
  EngineOptions options;
  options.kind = EngineKind::kPerDevice;
  options.cpu_worker_threads = 1;
  auto engine = CreateEngine(options);
  const Context cpu = Context::CPU();

  std::printf("1. Which thread runs a function (main is \"%s\"):\n", ThreadName().c_str());
  std::mutex print_mu;
  auto where = [&](const char* what) {
    return [&print_mu, what](RunContext) {
      std::lock_guard<std::mutex> lock(print_mu);
      std::printf("  %-15s ran on %s\n", what, ThreadName().c_str());
    };
  };
  engine->PushSync(where("kNormal"), cpu, {}, {}, FnProperty::kNormal);
  engine->PushSync(where("kCPUPrioritized"), cpu, {}, {}, FnProperty::kCPUPrioritized);
  engine->PushSync(where("kAsync"), cpu, {}, {}, FnProperty::kAsync);  // ready at push: runs here
  engine->WaitForAll();

  std::printf("2. Ten functions wait for the only normal worker; it starts them by priority:\n");
  std::promise<void> started, open;
  std::shared_future<void> opened = open.get_future().share();
  engine->PushSync(
      [&started, opened](RunContext) {
        started.set_value();
        opened.wait();
      },
      cpu, {}, {});
  started.get_future().wait();  // the worker is on the gate: what follows waits in the queue

  std::mutex order_mu;
  std::vector<int> order;  // guarded by order_mu
  const std::vector<int> priorities = {0, -5, 7, 3, 100, -1, 42, 1, 0, 9};
  for (int p : priorities) {
    engine->PushSync(
        [&order_mu, &order, p](RunContext) {
          std::lock_guard<std::mutex> lock(order_mu);
          order.push_back(p);
        },
        cpu, {}, {}, FnProperty::kNormal, p);
  }
  open.set_value();
  engine->WaitForAll();

  std::printf("  pushed:  ");
  for (int p : priorities) std::printf(" %d", p);
  std::printf("\n  started: ");
  for (int p : order) std::printf(" %d", p);
  std::printf("\n");
  const bool ok = order.size() == priorities.size() &&
                  std::is_sorted(order.begin(), order.end(), std::greater<>());
  std::printf("%s\n", ok ? "highest priority first" : "NOT IN PRIORITY ORDER");
  return ok ? 0 : 1;
}
