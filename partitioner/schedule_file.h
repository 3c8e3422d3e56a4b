// A user's schedule from a file: per worker, the order of its compute actions.
//
// JSON, in the names timelines and errors use:
//   {"name": "mine", "microbatches": 4, "placement": [0, 1, 1, 0],
//    "workers": [["F0.0", "F0.1", ..., "Bi3.0", "W3.0", ...], [...]]}
//   F<stage>.<mb> forward, B full backward, Bi (or I) input gradient, W weight
//   gradient; "placement" gives each virtual stage's worker (default: stage s on
//   worker s).
// CSV, as torch.distributed.pipelining writes its action lists: one line per rank,
//   cells "<stage><F|B|I|W><mb>" ("0F1", "3I0"); its communication and sharding
//   cells (SEND_F, RECV_B, UNSHARD, ...) and empty cells are skipped, and a stage
//   lives on the rank that runs its forwards.
//
// Sends and receives are added around each action (append_with_transfers), and
// one update per stage after its worker's last action: a flush schedule, so it
// trains one worker's weights. Backwards are either all whole (B) or all split
// (Bi then W).
#pragma once

#include <string>
#include <vector>

#include "partitioner/schedule.h"

namespace pipetrain::partitioner {

/// Whether `name` names a schedule file (ends in .json or .csv) rather than a
/// schedule of ours.
bool is_schedule_file(const std::string& name);

/// Loads, completes and validates the file. Throws PlanError naming the file and
/// the first bad action (its worker and position).
Schedule load_schedule_file(const std::string& path);

/// The same from text (`what` names it in errors); `csv` picks the format.
Schedule parse_schedule(const std::string& text, bool csv, const std::string& what);

/// A schedule from each worker's compute actions (kind, stage, microbatch):
/// transfers around them, each stage's update last on its worker, validated.
/// `placement[s]` is stage s's worker. Throws PlanError prefixed with `what`.
Schedule complete_schedule(const std::string& name, const std::vector<int>& placement,
                           int microbatches, const std::vector<std::vector<ScheduleOp>>& actions,
                           const std::string& what);

/// A flush schedule's compute actions as the JSON load_schedule_file reads (a
/// start for a schedule of one's own: `pipetrain simulate --schedule zb-v
/// --save-schedule mine.json`). Throws PlanError for replicated stages and for
/// asynchronous schedules (updates between actions), which a file cannot express.
std::string schedule_to_json(const Schedule& s);

}  // namespace pipetrain::partitioner
