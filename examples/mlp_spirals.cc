// Trains an MLP on two interleaved spirals with minibatch SGD on each
// engine kind, printing loss, accuracy and wall time, and the memory the
// executor's plan saves. Every operation goes through the engine.
//
//   mlp_spirals [epochs] [hidden] [batch]
#include <cstdio>
#include <cstdlib>

#include "spirals.h"

int main(int argc, char** argv) {
  spirals::Options opt;
  if (argc > 1) opt.epochs = std::atoi(argv[1]);
  if (argc > 2) opt.hidden = std::atoi(argv[2]);
  if (argc > 3) opt.batch = std::atoi(argv[3]);
  if (opt.epochs < 1 || opt.hidden < 1 || opt.batch < 1 ||
      (2 * opt.points_per_class) % opt.batch != 0) {
    std::fprintf(stderr, "usage: mlp_spirals [epochs >= 1] [hidden >= 1] [batch dividing %d]\n",
                 2 * opt.points_per_class);
    return 2;
  }
  std::printf("MLP 2-%d-%d-2 on %d spiral points, batch %d, %d epochs, SGD lr %.2f momentum %.2f\n",
              opt.hidden, opt.hidden, 2 * opt.points_per_class, opt.batch, opt.epochs, opt.lr,
              opt.momentum);
  struct Row {
    depengine::EngineKind kind;
    spirals::Result r;
  };
  std::vector<Row> rows;
  for (auto kind : {depengine::EngineKind::kNaive, depengine::EngineKind::kPooled,
                    depengine::EngineKind::kPerDevice}) {
    opt.kind = kind;
    rows.push_back({kind, spirals::Train(opt)});
  }
  const depengine::MemoryPlanStats& s = rows[0].r.train_plan;
  std::printf(
      "\nmemory plan (training executor, internal tensors): %d tensors in %d blocks, %d in place, "
      "%d forward outputs not kept for backward\n  naive %zu bytes, planned %zu bytes, saved %zu "
      "bytes "
      "(%.0f%%)\n",
      s.tensors, s.blocks, s.inplace, s.not_kept_for_backward, s.naive_bytes, s.planned_bytes,
      s.saved_bytes(),
      100.0 * static_cast<double>(s.saved_bytes()) / static_cast<double>(s.naive_bytes));
  std::printf("\n%-24s %10s %10s %10s\n", "engine", "loss", "accuracy", "seconds");
  bool same = true;
  for (const Row& row : rows) {
    std::printf("%-24s %10.4f %10.3f %10.3f\n", depengine::EngineKindName(row.kind),
                row.r.loss.back(), row.r.accuracy.back(), row.r.seconds);
    same = same && row.r.loss == rows[0].r.loss;
  }
  std::printf("\nlosses identical across engines: %s (same seed, same data flow)\n",
              same ? "yes" : "no");
  return rows.back().r.accuracy.back() >= 0.9 ? 0 : 1;
}
