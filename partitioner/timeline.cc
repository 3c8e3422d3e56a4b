// Timelines of simulated runs: Chrome trace JSON and an SVG picture.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>

#include <nlohmann/json.hpp>

#include "partitioner/simulator.h"

namespace pipetrain::partitioner {

namespace {

const char* color_of(OpKind k) {
  switch (k) {
    case OpKind::kForward: return "#4e79a7";
    case OpKind::kBackward: return "#59a14f";
    case OpKind::kBackwardInput: return "#59a14f";
    case OpKind::kBackwardWeight: return "#edc948";
    case OpKind::kAllreduce: return "#e15759";
    case OpKind::kStep: return "#b07aa1";
    default: return "#bab0ac";  // a receive: waiting
  }
}

// Text for an SVG element: op names hold "<-" and "->".
std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string chrome_trace(const std::vector<SimResult>& results) {
  nlohmann::json events = nlohmann::json::array();
  for (size_t r = 0; r < results.size(); ++r) {
    const SimResult& res = results[r];
    events.push_back(
        {{"name", "process_name"}, {"ph", "M"}, {"pid", r}, {"args", {{"name", res.schedule}}}});
    const int workers = static_cast<int>(res.run.busy_s.size());
    for (int w = 0; w < workers; ++w)
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", r},
                        {"tid", w},
                        {"args", {{"name", fmt::format("worker {}", res.physical_workers[w])}}}});
    for (const auto& t : res.run.ops) {
      if (t.end <= t.start) continue;
      events.push_back({{"name", to_string(t.op)},
                        {"ph", "X"},
                        {"pid", r},
                        // Allreduces overlap compute: on a collective track per worker.
                        {"tid", t.op.kind == OpKind::kAllreduce ? 200000 + t.worker : t.worker},
                        {"ts", t.start * 1e6},
                        {"dur", (t.end - t.start) * 1e6}});
    }
    // Transfers on their own tracks, one per directed link.
    for (const auto& t : res.run.transfers) {
      if (t.end <= t.start) continue;
      events.push_back({{"name", to_string(t.op)},
                        {"ph", "X"},
                        {"pid", r},
                        {"tid", 100000 + t.from * 1000 + t.to},
                        {"ts", t.start * 1e6},
                        {"dur", (t.end - t.start) * 1e6}});
    }
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n";
}

// A round tick step for an axis over `span` seconds: 1, 2 or 5 x 10^k, about 8 ticks.
double tick_step(double span) {
  const double raw = span / 8, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

std::string svg_timeline(const std::vector<SimResult>& results) {
  const double width = 1200, label = 150, row = 18, gap = 30, axis = 24, legend = 24;
  double height = 10 + legend;
  double span = 1e-12;  // one scale for all: simulated and measured compare by length
  for (const auto& r : results) {
    height += gap + row * r.run.busy_s.size() + axis;
    span = std::max(span, r.makespan_s);
  }
  const double scale = width / span;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n",
      width + label + 10, height);
  // Legend.
  double x = 4;
  const std::pair<OpKind, const char*> keys[] = {{OpKind::kForward, "forward"},
                                                 {OpKind::kBackward, "backward (input gradient)"},
                                                 {OpKind::kBackwardWeight, "weight gradient"},
                                                 {OpKind::kRecv, "wait (receive)"},
                                                 {OpKind::kAllreduce, "allreduce"},
                                                 {OpKind::kStep, "optimizer step"}};
  for (const auto& [kind, name] : keys) {
    s += fmt::format(
        "<rect x=\"{:.0f}\" y=\"10\" width=\"12\" height=\"12\" fill=\"{}\"/>"
        "<text x=\"{:.0f}\" y=\"20\">{}</text>\n",
        x, color_of(kind), x + 16, name);
    x += 24 + 6.5 * static_cast<double>(std::string(name).size());
  }
  double y = 10 + legend;
  const double step = tick_step(span);
  for (const auto& res : results) {
    s += fmt::format(
        "<text x=\"4\" y=\"{}\" font-weight=\"bold\">{}: {:.3f} ms, bubble {:.1f}%</text>\n",
        y + 14, xml_escape(res.schedule), res.makespan_s * 1e3, res.bubble_fraction * 100);
    y += gap;
    for (size_t w = 0; w < res.run.busy_s.size(); ++w)
      s += fmt::format("<text x=\"4\" y=\"{}\">worker {}</text>\n", y + row * w + 13,
                       res.physical_workers[w]);
    // A worker's model chunks (its stages, in order): the later ones drawn paler.
    std::map<std::pair<int, int>, int> chunk_of;  // (worker, stage) -> chunk
    for (const auto& t : res.run.ops) chunk_of.emplace(std::pair{t.worker, t.op.stage}, 0);
    for (auto it = chunk_of.begin(); it != chunk_of.end(); ++it)
      if (it != chunk_of.begin() && std::prev(it)->first.first == it->first.first)
        it->second = std::prev(it)->second + 1;
    for (const auto& t : res.run.ops) {
      if (t.end <= t.start) continue;
      double x0 = label + t.start * scale, wdt = std::max(0.5, (t.end - t.start) * scale);
      // Allreduces overlap compute: a thin bar along the bottom of the row.
      const bool ar = t.op.kind == OpKind::kAllreduce;
      const double top = y + row * t.worker + (ar ? row - 5 : 1), h = ar ? 4 : row - 2;
      const int chunk = chunk_of[{t.worker, t.op.stage}];
      s += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\" "
          "fill-opacity=\"{}\" stroke=\"white\" stroke-width=\"0.3\"><title>{}</title></rect>\n",
          x0, top, wdt, h, color_of(t.op.kind), chunk > 0 ? 0.6 : 1.0, xml_escape(to_string(t.op)));
      // The microbatch, where the box has room for it.
      const bool computes = t.op.kind == OpKind::kForward || t.op.kind == OpKind::kBackward ||
                            t.op.kind == OpKind::kBackwardInput ||
                            t.op.kind == OpKind::kBackwardWeight;
      if (computes && t.op.microbatch >= 0 && wdt >= 14)
        s += fmt::format(
            "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\" font-size=\"9\">{}</text>\n",
            x0 + wdt / 2, top + h / 2 + 3, t.op.microbatch);
    }
    y += row * res.run.busy_s.size();
    // Time axis: a line with ticks every `step`, labelled in ms.
    s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#555\"/>\n",
                     label, y + 2, label + width, y + 2);
    for (double t = 0; t <= span * (1 + 1e-9); t += step)
      s += fmt::format(
          "<line x1=\"{0:.2f}\" y1=\"{1:.1f}\" x2=\"{0:.2f}\" y2=\"{2:.1f}\" stroke=\"#555\"/>"
          "<text x=\"{0:.2f}\" y=\"{3:.1f}\" text-anchor=\"middle\" fill=\"#555\">{4:g} "
          "ms</text>\n",
          label + t * scale, y + 2, y + 6, y + 17, t * 1e3);
    y += axis;
  }
  s += "</svg>\n";
  return s;
}

}  // namespace pipetrain::partitioner
