// Builders for the standard pipeline schedules (PIPEDREAM.md sections 4-6),
// as per-worker op lists. Stage s has replicas[s] workers, numbered
// contiguously stage by stage; microbatch b of stage s runs on replica
// b mod replicas[s] (round-robin, backward on the replica that ran forward).
#pragma once

#include <string>
#include <vector>

#include "partitioner/schedule.h"

namespace pipetrain::partitioner {

enum class ScheduleKind {
  kGPipe,         // all forwards, then all backwards, flush, one step
  kOneFOneB,      // 1F1B with a flush (PipeDream-Flush): warm-up, 1F1B, cool-down, one step
  kPipeDream,     // asynchronous 1F1B, weight stashing, a step after every backward
  kTwoBW,         // PipeDream-2BW: asynchronous 1F1B, a step every `microbatches`
  kInterleaved,   // interleaved 1F1B (Megatron), `chunks` model chunks per worker, flush
  kZeroBubbleH1,  // ZB-H1: backward split into B (input) and W (weight), W delayed, flush
  kZeroBubbleH2,  // ZB-H2: ZB-H1 with 2P - 1 microbatches in flight, no bubble in the steady state
  kZeroBubbleV,   // ZB-V: two chunks per worker in a V, B/W split, 1F1B's memory, flush
  kDualPipeV,     // DualPipeV: a V fed from both ends of the step, F and B paired, flush
  kVHalf,         // V-Half: ZB-V's V at half its activation memory, flush
  kFromFile,      // a user's action lists (schedule_file.h), flush; not in all_schedule_kinds()
};

/// "gpipe", "1f1b", "pipedream", "2bw", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipev",
/// "v-half".
const char* schedule_name(ScheduleKind k);
/// Throws PlanError listing the names.
ScheduleKind parse_schedule_kind(const std::string& name);
/// Whether stages holding copies of a tied param exchange delayed partial
/// gradients (executor/pipeline/delayed_ties.h) instead of meeting at every
/// update: asynchronous 1F1B, unless its updates meet anyway for a global
/// gradient norm (`synced_updates`).
bool tied_gradients_delayed(ScheduleKind kind, bool synced_updates);
std::vector<ScheduleKind> all_schedule_kinds();
/// Every worker updates once per step after all its microbatches (all but
/// pipedream and 2bw).
bool flush_schedule(ScheduleKind kind);
/// Backward runs as B (input gradient) and W (weight gradient) ops.
bool splits_backward(ScheduleKind kind);

/// Where the virtual stages of a schedule with several model chunks per worker
/// live. Interleaved loops: worker w holds w, w + P, w + 2P, ... The V schedules
/// fold: worker w holds w going down and 2P - 1 - w coming back, so the last
/// stage (the loss) sits beside the first, and worker P - 1 hands its chunk 0's
/// output to its own chunk 1.
bool v_shaped(ScheduleKind kind);
/// Model chunks per worker: interleaved's `chunks`, 2 for a V, 1 otherwise.
int chunks_per_worker(ScheduleKind kind, int chunks);
struct ChunkPlace {
  int worker = 0;
  int chunk = 0;
};
/// Virtual stage `stage` of `workers` x chunks_per_worker(kind, chunks).
ChunkPlace place_chunk(ScheduleKind kind, int stage, int workers);
/// The virtual stage worker `worker`'s chunk `chunk` holds.
int chunk_stage(ScheduleKind kind, int worker, int chunk, int workers);

struct ScheduleShape {
  std::vector<int> replicas;  // per stage
  /// Flush schedules: microbatches per step. pipedream: minibatches run.
  /// 2bw: microbatches per step (3 steps are run).
  int microbatches = 1;
  int chunks = 2;  // interleaved only (a V has 2); `replicas` are then the workers
  int steps = 3;   // 2bw only
  /// Asynchronous schedules (pipedream, 2bw) with replicated stages: apply
  /// round k's update after the next round's backward, so its allreduce
  /// overlaps compute (one more round of staleness). false: right after the
  /// allreduce, which 2BW's one-step-late semantics needs.
  bool overlap_allreduce = true;
  /// gpipe and 1f1b, per stage (empty: none; the stages batched must be
  /// unreplicated): B computes input gradients only and the stage runs one W
  /// over the whole step after its last B (Schedule::batched_weights).
  std::vector<bool> batched_weights;
};

/// Appends `compute` (F, B, Bi or W) to `worker`'s program with the transfers it
/// needs: the Recv of its input before an F or B, the Send of its output after.
/// Consecutive stages exchange through a Send and a Recv even on one worker (a V's
/// bend): the executor hands such tensors over in memory, and the transfers of a
/// stage to later ones (skip connections) ride on the same op.
void append_with_transfers(Schedule& s, int worker, const ScheduleOp& compute);

/// Throws PlanError when the shape does not suit the schedule (interleaved
/// needs unreplicated stages and microbatches divisible by the stages;
/// batched weights gpipe or 1f1b and unreplicated stages).
Schedule build_schedule(ScheduleKind kind, const ScheduleShape& shape);

}  // namespace pipetrain::partitioner
