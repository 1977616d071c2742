#include "tbb_task_graph.h"

namespace depengine::bench::peers {

void TbbTaskGraph::Push(std::function<void()> body, Var* const* reads, std::size_t nreads,
                        Var* const* writes, std::size_t nwrites) {
  Node* node = new Node(std::move(body));
  for (std::size_t i = 0; i < nreads; ++i) {
    Var* v = reads[i];
    if (v->last_writer != nullptr) AddEdge(v->last_writer, node);
    v->readers.push_back(Ref(node));
  }
  for (std::size_t i = 0; i < nwrites; ++i) {
    Var* v = writes[i];
    if (!v->readers.empty()) {
      // The readers waited for the last writer already.
      for (Node* r : v->readers) {
        AddEdge(r, node);
        Unref(r);
      }
      v->readers.clear();
    } else if (v->last_writer != nullptr) {
      AddEdge(v->last_writer, node);
    }
    if (v->last_writer != nullptr) Unref(v->last_writer);
    v->last_writer = Ref(node);
  }
  if (node->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) Spawn(node);
}

void TbbTaskGraph::Forget(Var& var) {
  for (Node* r : var.readers) Unref(r);
  var.readers.clear();
  if (var.last_writer != nullptr) Unref(var.last_writer);
  var.last_writer = nullptr;
}

void TbbTaskGraph::AddEdge(Node* pred, Node* succ) {
  tbb::spin_mutex::scoped_lock lock(pred->mu);
  if (pred->done) return;
  succ->pending.fetch_add(1, std::memory_order_relaxed);
  if (pred->first_successor == nullptr) {
    pred->first_successor = succ;
  } else {
    pred->more_successors.push_back(succ);
  }
}

void TbbTaskGraph::Spawn(Node* node) {
  group_.run([this, node] { Execute(node); });
}

void TbbTaskGraph::Execute(Node* node) {
  node->body();
  Node* first = nullptr;
  std::vector<Node*> more;
  {
    tbb::spin_mutex::scoped_lock lock(node->mu);
    node->done = true;
    first = node->first_successor;
    more.swap(node->more_successors);
  }
  if (first != nullptr && first->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) Spawn(first);
  for (Node* s : more) {
    if (s->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) Spawn(s);
  }
  Unref(node);
}

}  // namespace depengine::bench::peers
