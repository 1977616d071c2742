// Fuzz programs: decoding bytes into a program, and describing it.
#include "program_decode.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace depengine::fuzz::internal {

const char* CodeName(Code c) {
  static const char* const kNames[] = {"NewVar",         "PushSync",   "PushAsync",
                                       "NewOperator",    "Push",       "DeleteOperator",
                                       "DeleteVariable", "WaitForVar", "Misuse"};
  return kNames[static_cast<int>(c)];
}
const char* ModeName(Mode m) {
  static const char* const kNames[] = {"sync",           "inline",          "completer",
                                       "completer+error", "throw-before-cb", "cb-then-throw",
                                       "cb-twice"};
  return kNames[static_cast<int>(m)];
}

// A var reference: >= 0 is one of the thread's own vars (by creation

namespace {

class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t Next() { return pos_ < size_ ? data_[pos_++] : 0; }
  bool Done() const { return pos_ >= size_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// What the decoder knows of one thread while decoding: which vars and
// operators are live, so that every op it makes names live objects.
struct DecodeState {
  int next_var = 0;
  std::vector<int> live_vars;
  int next_op = 0;
  std::vector<int> live_ops;
  std::map<int, std::vector<int>> op_vars;  // own vars each live operator uses
};

void DecodeVarSets(Reader& r, const DecodeState& s, Op* op) {
  const int nr = r.Next() % 4;
  for (int i = 0; i < nr; ++i) {
    const std::uint8_t b = r.Next();
    if (s.live_vars.empty() || b % 8 == 7) {
      op->reads.push_back(-1 - (b >> 3) % kSharedVars);
    } else {
      op->reads.push_back(s.live_vars[b % s.live_vars.size()]);
    }
  }
  const int nw = s.live_vars.empty() ? 0 : r.Next() % 3;
  for (int i = 0; i < nw; ++i) op->writes.push_back(s.live_vars[r.Next() % s.live_vars.size()]);
  // A var in both lists is a misuse, tested on purpose elsewhere.
  auto& rd = op->reads;
  rd.erase(std::remove_if(rd.begin(), rd.end(),
                          [&](int v) {
                            return std::find(op->writes.begin(), op->writes.end(), v) !=
                                   op->writes.end();
                          }),
           rd.end());
}

void DecodeFunction(Reader& r, const Program& p, bool async, Op* op) {
  const std::uint8_t f = r.Next();
  op->delay = (f >> 4) & 3;
  if (!async) {
    op->mode = Mode::kSync;
    op->fault = f % 16 == 0 ? Fault::kThrowBefore : f % 16 == 1 ? Fault::kThrowAfter : Fault::kNone;
    op->wait_inside = f % 16 == 2;
  } else {
    static const Mode kModes[16] = {
        Mode::kInline,    Mode::kInline,         Mode::kInline,
        Mode::kInline,    Mode::kInline,         Mode::kCompleter,
        Mode::kCompleter, Mode::kCompleter,      Mode::kCompleter,
        Mode::kCompleter, Mode::kCompleterError, Mode::kThrowBeforeCallback,
        Mode::kCallbackThenThrow, Mode::kCallbackTwice, Mode::kCompleter,
        Mode::kInline};
    op->mode = kModes[f % 16];
    // A second callback call after the engine is gone would be the
    // program's bug, not the engine's.
    if (op->mode == Mode::kCallbackTwice && p.destroy_in_flight) op->mode = Mode::kCompleter;
  }
  const std::uint8_t pr = r.Next() % 8;
  op->prop = pr == 0   ? FnProperty::kCPUPrioritized
             : pr == 1 ? FnProperty::kAsync
             : pr == 2 ? FnProperty::kCopyToGPU
             : pr == 3 ? FnProperty::kCopyFromGPU
                       : FnProperty::kNormal;
}

void DecodePlacement(Reader& r, const Program& p, Op* op) {
  const std::uint8_t b = r.Next();
  op->priority = b % 4 == 0 ? static_cast<int>((b >> 2) % 7) - 3
                 : b == 1   ? kMaxPriority
                 : b == 2   ? kMinPriority
                            : 0;
  const std::uint8_t c = r.Next() % 8;
  if (c == 0) {
    op->ctx = Context::CPU(1);
  } else if (c == 1 && p.simulated_gpus >= 1) {
    op->ctx = Context::GPU(0);
  } else if (c == 2 && p.simulated_gpus >= 2) {
    op->ctx = Context::GPU(1);
  } else if (c == 3) {
    op->ctx = Context::CPUPinned(0);
  } else {
    op->ctx = Context::CPU(0);
  }
}

Op DecodeOp(Reader& r, const Program& p, DecodeState& s) {
  static const Code kTable[16] = {
      Code::kNewVar,       Code::kPushSync,     Code::kPushSync,       Code::kPushSync,
      Code::kPushSync,     Code::kPushAsync,    Code::kPushAsync,      Code::kPushAsync,
      Code::kNewOperator,  Code::kPushOperator, Code::kPushOperator,   Code::kDeleteOperator,
      Code::kDeleteVar,    Code::kWaitForVar,   Code::kWaitForVar,     Code::kMisuse};
  Op op;
  op.code = kTable[r.Next() % 16];
  // Fall back to a push when an op has nothing to act on.
  if (op.code == Code::kNewVar && s.live_vars.size() >= kMaxLiveVars) op.code = Code::kPushSync;
  if (op.code == Code::kNewOperator && s.live_ops.size() >= kMaxLiveOps) op.code = Code::kPushAsync;
  if ((op.code == Code::kPushOperator || op.code == Code::kDeleteOperator) && s.live_ops.empty()) {
    op.code = Code::kPushSync;
  }
  std::vector<int> deletable;
  if (op.code == Code::kDeleteVar) {
    for (int v : s.live_vars) {
      bool used = false;
      for (const auto& [id, vars] : s.op_vars) {
        used = used || std::find(vars.begin(), vars.end(), v) != vars.end();
      }
      if (!used) deletable.push_back(v);
    }
    if (deletable.empty()) op.code = Code::kWaitForVar;
  }
  switch (op.code) {
    case Code::kNewVar:
      op.target = s.next_var++;
      s.live_vars.push_back(op.target);
      break;
    case Code::kPushSync:
    case Code::kPushAsync:
      DecodeVarSets(r, s, &op);
      DecodeFunction(r, p, op.code == Code::kPushAsync, &op);
      DecodePlacement(r, p, &op);
      break;
    case Code::kNewOperator: {
      DecodeVarSets(r, s, &op);
      DecodeFunction(r, p, /*async=*/true, &op);
      op.target = s.next_op++;
      s.live_ops.push_back(op.target);
      std::vector<int>& used = s.op_vars[op.target];
      for (int v : op.reads) {
        if (v >= 0) used.push_back(v);
      }
      used.insert(used.end(), op.writes.begin(), op.writes.end());
      break;
    }
    case Code::kPushOperator:
      op.target = s.live_ops[r.Next() % s.live_ops.size()];
      DecodePlacement(r, p, &op);
      break;
    case Code::kDeleteOperator: {
      const std::size_t i = r.Next() % s.live_ops.size();
      op.target = s.live_ops[i];
      s.live_ops.erase(s.live_ops.begin() + static_cast<std::ptrdiff_t>(i));
      s.op_vars.erase(op.target);
      break;
    }
    case Code::kDeleteVar: {
      op.target = deletable[r.Next() % deletable.size()];
      s.live_vars.erase(std::find(s.live_vars.begin(), s.live_vars.end(), op.target));
      break;
    }
    case Code::kWaitForVar: {
      const std::uint8_t b = r.Next();
      op.target = s.live_vars.empty() || b % 8 == 7 ? -1 - (b >> 3) % kSharedVars
                                                    : s.live_vars[b % s.live_vars.size()];
      break;
    }
    case Code::kMisuse: {
      const std::uint8_t b = r.Next();
      op.misuse = static_cast<Misuse>(b % static_cast<int>(Misuse::kCount));
      if (op.misuse == Misuse::kBothLists && s.live_vars.empty()) op.misuse = Misuse::kNullVar;
      if (op.misuse == Misuse::kBothLists) op.target = s.live_vars[(b >> 3) % s.live_vars.size()];
      op.priority = (b >> 3) % 2 ? kMaxPriority + 1 : kMinPriority - 1;
      break;
    }
  }
  return op;
}

}  // namespace

Program Decode(const std::uint8_t* data, std::size_t size) {
  Reader r(data, size);
  Program p;
  const std::uint8_t h0 = r.Next();
  p.kind = static_cast<EngineKind>(h0 % 3);
  p.workers = 1 + (h0 / 3) % 3;
  const std::uint8_t h1 = r.Next();
  p.threads = 1 + h1 % 3;
  p.max_in_flight = (h1 >> 2) % 4 == 0 ? 1 + (h1 >> 4) % 8 : 0;
  p.destroy_in_flight = (h1 >> 7) & 1;
  const std::uint8_t h2 = r.Next();
  p.simulated_gpus = h2 % 3;
  p.completers = 1 + (h2 >> 2) % 2;
  // Bits 3-4 of h2, which no field above has to itself (h2 % 3 reads every
  // bit): each committed corpus input decodes to the program it did before,
  // now with one of the four spins.
  constexpr int kSpins[] = {EngineOptions::kDefaultWorkerSpinUs, 0, 2, 1000};
  p.worker_spin_us = kSpins[(h2 >> 3) % 4];
  std::vector<DecodeState> states(static_cast<std::size_t>(p.threads));
  while (!r.Done() && static_cast<int>(p.segments.size()) < kMaxSegments) {
    Segment seg;
    seg.threads.resize(static_cast<std::size_t>(p.threads));
    for (int t = 0; t < p.threads && !r.Done(); ++t) {
      const int n = 1 + r.Next() % kMaxOpsPerSegment;
      for (int i = 0; i < n && !r.Done(); ++i) {
        seg.threads[static_cast<std::size_t>(t)].push_back(DecodeOp(r, p, states[static_cast<std::size_t>(t)]));
      }
    }
    seg.wait_all = r.Next() % 4 != 0;
    p.segments.push_back(std::move(seg));
  }
  return p;
}

namespace {
std::string VarList(const std::vector<int>& vars) {
  std::string s = "{";
  for (std::size_t i = 0; i < vars.size(); ++i) {
    if (i > 0) s += ",";
    s += vars[i] >= 0 ? 'v' : 's';
    s += std::to_string(vars[i] >= 0 ? vars[i] : -1 - vars[i]);
  }
  return s + "}";
}
}  // namespace

std::string DescribeOp(const Op& op) {
  std::ostringstream o;
  o << CodeName(op.code);
  switch (op.code) {
    case Code::kNewVar:
    case Code::kDeleteVar:
      o << " v" << op.target;
      break;
    case Code::kWaitForVar:
      o << " " << VarList({op.target});
      break;
    case Code::kPushSync:
    case Code::kPushAsync:
    case Code::kNewOperator:
      o << " reads " << VarList(op.reads) << " writes " << VarList(op.writes) << " "
        << ModeName(op.mode);
      if (op.fault == Fault::kThrowBefore) o << " throw-before";
      if (op.fault == Fault::kThrowAfter) o << " throw-after";
      if (op.wait_inside) o << " wait-inside";
      o << " prop " << static_cast<int>(op.prop) << " delay " << op.delay;
      if (op.code == Code::kNewOperator) o << " -> op" << op.target;
      break;
    case Code::kPushOperator:
    case Code::kDeleteOperator:
      o << " op" << op.target;
      break;
    case Code::kMisuse:
      o << " kind " << static_cast<int>(op.misuse);
      break;
  }
  if (op.code == Code::kPushSync || op.code == Code::kPushAsync || op.code == Code::kPushOperator) {
    o << " ctx " << static_cast<int>(op.ctx.dev_type) << ":" << op.ctx.dev_id << " prio "
      << op.priority;
  }
  return o.str();
}

std::string Describe(const Program& p) {
  std::ostringstream o;
  o << "engine " << EngineKindName(p.kind) << " workers " << p.workers << " threads " << p.threads
    << " max_in_flight " << p.max_in_flight << " simulated_gpus " << p.simulated_gpus
    << " completers " << p.completers << " worker_spin_us " << p.worker_spin_us
    << (p.destroy_in_flight ? " destroy-in-flight" : "") << "\n";
  for (std::size_t s = 0; s < p.segments.size(); ++s) {
    o << "segment " << s << (p.segments[s].wait_all ? " (then WaitForAll)" : "") << "\n";
    for (std::size_t t = 0; t < p.segments[s].threads.size(); ++t) {
      for (const Op& op : p.segments[s].threads[t]) o << "  t" << t << ": " << DescribeOp(op) << "\n";
    }
  }
  return o.str();
}

}  // namespace depengine::fuzz::internal
