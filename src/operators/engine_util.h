// Helpers for pushing array work to the engine: building var lists the
// engine accepts (no duplicates, no var both read and written).
#pragma once

#include <algorithm>
#include <vector>

#include "depengine/engine.h"

namespace depengine::internal {

// The read and write lists of one push. Add vars in any order, any number
// of times; Finish() merges duplicates and drops from `reads` every var
// that is also written (a write covers a read). Not thread-safe.
class VarLists {
 public:
  void Read(VarHandle v) {
    if (v != nullptr) reads_.push_back(v);
  }
  void Write(VarHandle v) {
    if (v != nullptr) writes_.push_back(v);
  }
  void Finish() {
    Dedup(&writes_);
    Dedup(&reads_);
    std::erase_if(reads_, [this](VarHandle v) {
      return std::binary_search(writes_.begin(), writes_.end(), v);
    });
  }
  const std::vector<VarHandle>& reads() const { return reads_; }
  const std::vector<VarHandle>& writes() const { return writes_; }

 private:
  static void Dedup(std::vector<VarHandle>* v) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  std::vector<VarHandle> reads_;
  std::vector<VarHandle> writes_;
};

}  // namespace depengine::internal
