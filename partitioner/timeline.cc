// Timelines of simulated runs: Chrome trace JSON and an SVG picture.
#include <fmt/core.h>

#include <algorithm>

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
    default: return "#bab0ac";
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

std::string svg_timeline(const std::vector<SimResult>& results) {
  const double width = 1200, label = 150, row = 18, gap = 30;
  double height = 10;
  for (const auto& r : results) height += gap + row * r.run.busy_s.size();
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n",
      width + label + 10, height);
  double y = 10;
  for (const auto& res : results) {
    double span = std::max(res.makespan_s, 1e-12);
    double scale = width / span;
    s += fmt::format(
        "<text x=\"4\" y=\"{}\" font-weight=\"bold\">{}: {:.3f} ms, bubble {:.1f}%</text>\n",
        y + 14, xml_escape(res.schedule), res.makespan_s * 1e3, res.bubble_fraction * 100);
    y += gap;
    for (size_t w = 0; w < res.run.busy_s.size(); ++w)
      s += fmt::format("<text x=\"4\" y=\"{}\">worker {}</text>\n", y + row * w + 13,
                       res.physical_workers[w]);
    for (const auto& t : res.run.ops) {
      if (t.end <= t.start) continue;
      double x = label + t.start * scale, wdt = std::max(0.5, (t.end - t.start) * scale);
      // Allreduces overlap compute: a thin bar along the bottom of the row.
      const bool ar = t.op.kind == OpKind::kAllreduce;
      const double top = y + row * t.worker + (ar ? row - 5 : 1), h = ar ? 4 : row - 2;
      s += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\" "
          "stroke=\"white\" stroke-width=\"0.3\"><title>{}</title></rect>\n",
          x, top, wdt, h, color_of(t.op.kind), xml_escape(to_string(t.op)));
    }
    y += row * res.run.busy_s.size();
  }
  s += "</svg>\n";
  return s;
}

}  // namespace pipetrain::partitioner
