#include "partitioner/schedule_file.h"

#include <fmt/core.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "ir/error.h"
#include "partitioner/schedules.h"

namespace pipetrain::partitioner {

namespace {

struct Action {
  ScheduleOp op;
  std::string token;  // as written, for errors
};

// "F3.2", "B3.2", "Bi3.2" or "I3.2", "W3.2".
std::optional<ScheduleOp> parse_ours(const std::string& token) {
  static const std::regex re(R"(^(F|B|Bi|I|W)(\d{1,6})\.(\d{1,6})$)");
  std::smatch m;
  if (!std::regex_match(token, m, re)) return std::nullopt;
  const std::string k = m[1];
  const OpKind kind = k == "F"   ? OpKind::kForward
                      : k == "B" ? OpKind::kBackward
                      : k == "W" ? OpKind::kBackwardWeight
                                 : OpKind::kBackwardInput;
  return ScheduleOp{kind, std::stoi(m[2]), std::stoi(m[3])};
}

// torch.distributed.pipelining's "<stage><type><mb>"; nullopt for a cell to skip.
std::optional<ScheduleOp> parse_torch(const std::string& cell, bool* known) {
  static const std::regex re(
      R"(^(\d{1,6})(F|I|B|W|FULL_BACKWARD|SEND_F|RECV_F|SEND_B|RECV_B|UNSHARD|RESHARD|REDUCE_GRAD)(\d{0,6})$)");
  std::smatch m;
  *known = cell.empty() || cell == "None";
  if (*known || !std::regex_match(cell, m, re)) return std::nullopt;
  *known = true;
  const std::string k = m[2];
  if (m[3].length() == 0 || (k != "F" && k != "I" && k != "B" && k != "W" && k != "FULL_BACKWARD"))
    return std::nullopt;  // communication and sharding: ours are added
  const OpKind kind = k == "F"   ? OpKind::kForward
                      : k == "I" ? OpKind::kBackwardInput
                      : k == "W" ? OpKind::kBackwardWeight
                                 : OpKind::kBackward;
  return ScheduleOp{kind, std::stoi(m[1]), std::stoi(m[3])};
}

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t\r\"");
  const auto b = s.find_last_not_of(" \t\r\"");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::vector<std::vector<Action>> read_csv(const std::string& text, const std::string& what) {
  std::vector<std::vector<Action>> rows;
  std::istringstream lines(text);
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    if (trim(line).empty()) continue;
    std::vector<Action> row;
    std::istringstream cells(line);
    std::string cell;
    for (int c = 1; std::getline(cells, cell, ','); ++c) {
      cell = trim(cell);
      bool known = false;
      if (auto op = parse_torch(cell, &known)) row.push_back({*op, cell});
      if (!known)
        throw PlanError(
            fmt::format("{}: line {}, cell {}: '{}' is not an action (stage, then F, "
                        "I, B or W, then the microbatch: '0F1')",
                        what, n, c, cell));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<std::vector<Action>> read_json(const std::string& text, const std::string& what,
                                           std::string* name, int* microbatches,
                                           std::vector<int>* placement) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw PlanError(what + ": not JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("workers") || !j["workers"].is_array())
    throw PlanError(what + ": needs \"workers\": one list of actions per worker");
  if (j.contains("name") && j["name"].is_string()) *name = j["name"];
  if (j.contains("microbatches")) {
    if (!j["microbatches"].is_number_integer() || j["microbatches"].get<int>() < 1)
      throw PlanError(what + ": \"microbatches\" must be a positive integer");
    *microbatches = j["microbatches"];
  }
  if (j.contains("placement")) {
    if (!j["placement"].is_array()) throw PlanError(what + ": \"placement\" must be a list");
    for (const auto& w : j["placement"]) {
      if (!w.is_number_integer() || w.get<int>() < 0)
        throw PlanError(what + ": \"placement\" lists each virtual stage's worker, from 0");
      placement->push_back(w);
    }
  }
  std::vector<std::vector<Action>> rows;
  for (size_t w = 0; w < j["workers"].size(); ++w) {
    const auto& list = j["workers"][w];
    if (!list.is_array()) throw PlanError(fmt::format("{}: worker {}: not a list", what, w));
    std::vector<Action> row;
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string token = list[k].is_string() ? list[k].get<std::string>() : list[k].dump();
      auto op = parse_ours(token);
      if (!op)
        throw PlanError(
            fmt::format("{}: worker {}, action {}: '{}' is not an action (F, B, Bi "
                        "or W, then stage.microbatch: 'F0.1')",
                        what, w, k, token));
      row.push_back({*op, token});
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

bool is_schedule_file(const std::string& name) {
  auto ends = [&](const std::string& suffix) {
    return name.size() > suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends(".json") || ends(".csv");
}

Schedule parse_schedule(const std::string& text, bool csv, const std::string& what) {
  std::string name = what.substr(what.find_last_of('/') + 1);  // unnamed: the file's
  int microbatches = 0;
  std::vector<int> placement;
  const auto rows =
      csv ? read_csv(text, what) : read_json(text, what, &name, &microbatches, &placement);
  const int workers = static_cast<int>(rows.size());
  if (workers < 1) throw PlanError(what + ": no workers");
  // Stages and microbatches from the actions; each stage on the worker of its forwards.
  int stages = static_cast<int>(placement.size()), seen_mb = 0;
  bool split = false, whole = false;
  const Action* first_whole = nullptr;
  std::map<int, std::set<int>> forwards_on;  // stage -> workers running its forwards
  for (int w = 0; w < workers; ++w)
    for (const Action& a : rows[static_cast<size_t>(w)]) {
      stages = std::max(stages, a.op.stage + 1);
      seen_mb = std::max(seen_mb, a.op.microbatch + 1);
      if (a.op.kind == OpKind::kForward) forwards_on[a.op.stage].insert(w);
      if (a.op.kind == OpKind::kBackward)
        whole = true, first_whole = first_whole ? first_whole : &a;
      if (a.op.kind == OpKind::kBackwardInput || a.op.kind == OpKind::kBackwardWeight) split = true;
    }
  if (split && whole)
    throw PlanError(
        fmt::format("{}: '{}' is a whole backward, but other backwards are split into "
                    "input and weight halves: use one kind throughout",
                    what, first_whole->token));
  if (microbatches == 0) microbatches = seen_mb;
  if (seen_mb > microbatches)
    throw PlanError(fmt::format("{}: an action names microbatch {}, but the schedule has {}", what,
                                seen_mb - 1, microbatches));
  if (placement.empty()) {
    for (int st = 0; st < stages; ++st) {
      const auto it = forwards_on.find(st);
      if (it == forwards_on.end())
        throw PlanError(fmt::format("{}: stage {} has no forward on any worker", what, st));
      if (it->second.size() > 1)
        throw PlanError(
            fmt::format("{}: stage {} runs forwards on workers {} and {}: a stage "
                        "lives on one worker",
                        what, st, *it->second.begin(), *it->second.rbegin()));
      placement.push_back(*it->second.begin());
    }
  } else if (static_cast<int>(placement.size()) != stages) {
    throw PlanError(fmt::format("{}: \"placement\" places {} stages, the actions name {}", what,
                                placement.size(), stages));
  }
  for (int st = 0; st < stages; ++st) {
    const int w = placement[static_cast<size_t>(st)];
    if (w >= workers)
      throw PlanError(fmt::format("{}: stage {} is placed on worker {}, but there are {} workers",
                                  what, st, w, workers));
  }
  std::vector<std::vector<ScheduleOp>> actions(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w)
    for (const Action& a : rows[static_cast<size_t>(w)]) {
      if (placement[static_cast<size_t>(a.op.stage)] != w)
        throw PlanError(fmt::format("{}: worker {} runs '{}', but stage {} lives on worker {}", what,
                                    w, a.token, a.op.stage,
                                    placement[static_cast<size_t>(a.op.stage)]));
      actions[static_cast<size_t>(w)].push_back(a.op);
    }
  return complete_schedule(name, placement, microbatches, actions, what);
}

Schedule complete_schedule(const std::string& name, const std::vector<int>& placement,
                           int microbatches, const std::vector<std::vector<ScheduleOp>>& actions,
                           const std::string& what) {
  Schedule s;
  s.name = name;
  s.num_stages = static_cast<int>(placement.size());
  s.num_microbatches = microbatches;
  s.programs.resize(actions.size());
  for (const int w : placement) s.stage_workers.push_back({w});
  for (size_t w = 0; w < actions.size(); ++w) {
    for (const ScheduleOp& op : actions[w]) {
      s.split_backward = s.split_backward || op.kind == OpKind::kBackwardInput ||
                         op.kind == OpKind::kBackwardWeight;
      append_with_transfers(s, static_cast<int>(w), op);
    }
    for (int st = 0; st < s.num_stages; ++st)  // the flush: each of its stages' update, last
      if (placement[static_cast<size_t>(st)] == static_cast<int>(w))
        s.programs[w].push_back({OpKind::kStep, st, 0});
  }
  try {
    validate(s);
  } catch (const PlanError& e) {
    throw PlanError(what + ": " + e.what());
  }
  return s;
}

std::string schedule_to_json(const Schedule& s) {
  nlohmann::json j;
  j["name"] = s.name;
  j["microbatches"] = s.num_microbatches;
  std::vector<int> placement;
  for (const auto& ws : s.stage_workers) {
    if (ws.size() != 1)
      throw PlanError("schedule '" + s.name +
                      "' replicates a stage: a schedule file places each "
                      "stage on one worker");
    placement.push_back(ws.front());
  }
  j["placement"] = placement;
  j["workers"] = nlohmann::json::array();
  for (const auto& prog : s.programs) {
    nlohmann::json list = nlohmann::json::array();
    bool stepped = false;
    for (const ScheduleOp& op : prog) {
      if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) continue;
      if (op.kind == OpKind::kStep) {
        stepped = true;
        continue;
      }
      if (stepped || op.kind == OpKind::kAllreduce || op.microbatch == kWholeStep)
        throw PlanError("schedule '" + s.name + "' is not a flush of per-microbatch actions (" +
                        to_string(op) + "): a schedule file cannot express it");
      list.push_back(to_string(op));
    }
    j["workers"].push_back(list);
  }
  return j.dump(1) + "\n";
}

Schedule load_schedule_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw PlanError(path + ": cannot read the schedule file");
  std::stringstream text;
  text << in.rdbuf();
  const bool csv = path.size() > 4 && path.compare(path.size() - 4, 4, ".csv") == 0;
  return parse_schedule(text.str(), csv, path);
}

}  // namespace pipetrain::partitioner
