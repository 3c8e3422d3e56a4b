// What `pipetrain train` shows and writes: a progress bar (or one line per
// epoch with --quiet), metrics.jsonl, and a loss curve as SVG.
#pragma once

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "executor/fit.h"

namespace pipetrain::cli {

class TrainReport {
 public:
  /// Writes metrics to `metrics_path` ("" for none): every `log_every` steps and each
  /// epoch's last.
  TrainReport(bool quiet, int64_t epochs, const std::string& metrics_path, int64_t log_every = 10);
  void step(const exec::StepReport& s);
  void epoch(const exec::EpochReport& e);
  /// A language model's data (text:, tokens:): the epoch lines call the test split validation
  /// and add its perplexity beside the unigram baseline's (nats per token, > 0).
  void set_unigram_loss(double nats) { unigram_loss_ = nats; }
  /// Loss per step (and test loss per epoch) as an SVG line chart; atomic.
  void write_loss_svg(const std::string& path) const;

 private:
  int64_t log_every_ = 10;
  bool quiet_;
  int64_t epochs_;
  std::string metrics_path_;
  std::ofstream metrics_;
  std::vector<double> losses_;                         // per step
  std::vector<std::pair<int64_t, double>> test_loss_;  // (step, loss) per epoch
  double ema_loss_ = 0;
  double last_draw_ = -1;
  int64_t first_step_ = -1;  // the first step this run reported
  double unigram_loss_ = 0;  // 0: not a language model's data
};

}  // namespace pipetrain::cli
