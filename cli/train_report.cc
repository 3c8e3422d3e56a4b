#include "cli/train_report.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "ir/error.h"

namespace pipetrain::cli {

namespace {

std::string clock_str(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                   : fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

TrainReport::TrainReport(bool quiet, int64_t epochs, const std::string& metrics_path,
                         int64_t log_every)
    : log_every_(log_every),
      quiet_(quiet || !isatty(fileno(stderr))),
      epochs_(epochs),
      metrics_path_(metrics_path) {
  if (!metrics_path.empty()) {
    metrics_.open(metrics_path, std::ios::trunc);
    if (!metrics_) throw Error(metrics_path + ": cannot open for writing");
  }
}

void TrainReport::step(const exec::StepReport& s) {
  losses_.push_back(s.result.loss);
  ema_loss_ = losses_.size() == 1 ? s.result.loss : 0.95 * ema_loss_ + 0.05 * s.result.loss;
  if (first_step_ < 0) first_step_ = s.step;  // a resumed run starts past 0
  const double rate =
      s.seconds > 0 ? double((s.step - first_step_ + 1) * s.batch_size) / s.seconds : 0;
  if (metrics_ && (s.step % log_every_ == 0 || s.batch + 1 == s.batches_per_epoch))
    metrics_ << fmt::format(
        "{{\"step\": {}, \"epoch\": {}, \"loss\": {:.9g}, \"lr\": {:.9g}, {}"
        "\"samples_per_s\": {:.1f}, \"seconds\": {:.3f}}}\n",
        s.step, s.epoch, s.result.loss, s.result.lr,
        // A norm no run measured is left out, never written as a number.
        std::isfinite(s.result.grad_norm)
            ? fmt::format("\"grad_norm\": {:.6g}, ", s.result.grad_norm)
            : std::string(),
        rate, s.seconds);
  if (quiet_) return;
  const bool last = s.batch + 1 == s.batches_per_epoch;
  if (!last && s.seconds - last_draw_ < 0.1) return;  // at most 10 redraws a second
  last_draw_ = s.seconds;
  const double done = double(s.batch + 1) / double(s.batches_per_epoch);
  const int width = 28, fill = static_cast<int>(done * width);
  const int64_t left_steps = (epochs_ - s.epoch) * s.batches_per_epoch - s.batch - 1;
  const double eta = rate > 0 ? double(left_steps * s.batch_size) / rate : 0;
  fmt::print(stderr, "\repoch {}/{} [{}{}] {}/{}  loss {:.4f}  {:.0f} samples/s  ETA {}  ",
             s.epoch + 1, epochs_, std::string(static_cast<size_t>(fill), '='),
             std::string(static_cast<size_t>(width - fill), ' '), s.batch + 1, s.batches_per_epoch,
             ema_loss_, rate, clock_str(eta));
  std::fflush(stderr);
}

void TrainReport::epoch(const exec::EpochReport& e) {
  if (!quiet_) fmt::print(stderr, "\n");
  std::string test;
  if (unigram_loss_ > 0 && e.test.samples > 0) {
    test = fmt::format("  val loss {:.4f}  perplexity {:.2f} (unigram {:.2f})", e.test.loss,
                       std::exp(e.test.loss), std::exp(unigram_loss_));
  } else {
    if (e.test.samples > 0) test = fmt::format("  test loss {:.4f}", e.test.loss);
    if (e.test.has_accuracy) test += fmt::format("  test accuracy {:.2f}%", 100 * e.test.accuracy);
  }
  fmt::print("epoch {}/{}: train loss {:.4f}{}  ({:.1f} s, {:.0f} samples/s)\n", e.epoch + 1,
             epochs_, e.train_loss, test, e.seconds, e.samples_per_s);
  std::fflush(stdout);
  if (e.test.samples > 0)
    test_loss_.emplace_back(static_cast<int64_t>(losses_.size()) - 1, e.test.loss);
  if (metrics_) {
    metrics_ << fmt::format(
        "{{\"epoch\": {}, \"train_loss\": {:.6g}, \"test_loss\": {:.6g}, \"test_accuracy\": "
        "{:.6g}, \"test_perplexity\": {:.6g}, \"unigram_perplexity\": {:.6g}, \"seconds\": "
        "{:.3f}, \"samples_per_s\": {:.1f}}}\n",
        e.epoch, e.train_loss, e.test.loss, e.test.accuracy, std::exp(e.test.loss),
        unigram_loss_ > 0 ? std::exp(unigram_loss_) : 0.0, e.seconds, e.samples_per_s);
    metrics_.flush();
  }
}

void TrainReport::write_loss_svg(const std::string& path) const {
  if (losses_.empty()) return;
  const double w = 720, h = 360, left = 60, right = 20, top = 20, bottom = 40;
  double hi = 0;
  for (double l : losses_) hi = std::max(hi, std::isfinite(l) ? l : 0.0);
  for (const auto& [s, l] : test_loss_) hi = std::max(hi, l);
  if (hi <= 0) hi = 1;
  const double n = static_cast<double>(std::max<size_t>(losses_.size() - 1, 1));
  auto x = [&](double i) { return left + (w - left - right) * i / n; };
  auto y = [&](double l) { return top + (h - top - bottom) * (1 - l / hi); };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n",
      w, h);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", left,
                     top, h - bottom);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", left,
                     h - bottom, w - right);
  for (int k = 0; k <= 4; ++k) {
    const double l = hi * k / 4;
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.3g}</text>\n", left - 6,
                       y(l) + 4, l);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step (0 .. {})</text>\n",
                     (left + w - right) / 2, h - 10, losses_.size() - 1);
  std::string pts;
  const size_t stride = std::max<size_t>(1, losses_.size() / 2000);
  for (size_t i = 0; i < losses_.size(); i += stride)
    if (std::isfinite(losses_[i]))
      pts += fmt::format("{:.1f},{:.1f} ", x(double(i)), y(losses_[i]));
  svg += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1\" points=\"" + pts + "\"/>\n";
  for (const auto& [s, l] : test_loss_)
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#d62728\"/>\n",
                       x(double(s)), y(l));
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" fill=\"#1f77b4\">train loss per step</text>\n"
      "<text x=\"{}\" y=\"{}\" fill=\"#d62728\">test loss per epoch</text>\n</svg>\n",
      w - 260, top + 12, w - 260, top + 28);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << svg;
    if (!out) throw Error(path + ": cannot write");
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace pipetrain::cli
