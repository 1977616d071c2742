// What a oneTBB user has to write to run a serial program's functions by
// the vars they read and write: oneTBB has no read/write tracking, so this
// keeps, per var, the last writer and the readers since, turns each push
// into edges to the functions it must wait for, and runs a function on a
// tbb::task_group once its last predecessor finishes.
//
// A flow graph is not used for the edges: a continue_node counts its
// predecessors when make_edge is called, and a predecessor that finishes
// between that count and its message would leave the node waiting forever,
// so adding nodes to a running flow graph needs this same bookkeeping
// anyway; task_group plus a counter per function is the simpler of the two.
//
// The tracker runs on the pushing thread (Push is not thread-safe, as in a
// serial program); completions run on TBB's threads. Its cost is inside the
// timed region, because a user would have to pay it.
#pragma once

#include <oneapi/tbb/spin_mutex.h>
#include <oneapi/tbb/task_group.h>

#include <atomic>
#include <functional>
#include <initializer_list>
#include <vector>

namespace depengine::bench::peers {

class TbbTaskGraph {
 public:
  struct Node;

  // A var: the node that last writes it and the nodes that read it since.
  // Touched by the pushing thread only.
  struct Var {
    Node* last_writer = nullptr;
    std::vector<Node*> readers;
  };

  explicit TbbTaskGraph(tbb::task_group& group) : group_(group) {}

  // Runs `body` after every earlier function that writes a var in `reads`,
  // and after every earlier function that reads or writes a var in
  // `writes`. A var must not be in both lists.
  void Push(std::function<void()> body, std::initializer_list<Var*> reads,
            std::initializer_list<Var*> writes) {
    Push(std::move(body), reads.begin(), reads.size(), writes.begin(), writes.size());
  }
  void Push(std::function<void()> body, Var* const* reads, std::size_t nreads, Var* const* writes,
            std::size_t nwrites);

  // Drops the tracker's references to finished nodes; call after the task
  // group's wait, before the vars go away.
  static void Forget(Var& var);

  // One pushed function.
  struct Node {
    explicit Node(std::function<void()> b) : body(std::move(b)) {}
    std::function<void()> body;
    // Unfinished predecessors, plus 1 while Push is still adding edges.
    std::atomic<int> pending{1};
    // References: 1 until the node has run, plus 1 per tracker slot (a var's
    // last_writer or readers) that holds it.
    std::atomic<int> refs{1};
    tbb::spin_mutex mu;        // guards done and successors
    bool done = false;         // ran; later edges to it are not needed
    Node* first_successor = nullptr;  // most nodes have one successor or none
    std::vector<Node*> more_successors;
  };

 private:
  void AddEdge(Node* pred, Node* succ);
  void Spawn(Node* node);
  void Execute(Node* node);
  static Node* Ref(Node* node) {
    node->refs.fetch_add(1, std::memory_order_relaxed);
    return node;
  }
  static void Unref(Node* node) {
    if (node->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete node;
  }

  tbb::task_group& group_;
};

}  // namespace depengine::bench::peers
