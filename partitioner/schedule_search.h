// Schedule search: a flush schedule with split backwards, found for a plan and
// its measured profile, that the simulator times below every hand-made flush
// schedule within the same memory.
//
// Candidates come from list scheduling on the simulator's own op times: each
// worker, when free, starts the op that can start first (on a tie: B, then F,
// then W), F only while fewer than L microbatches are stashed on it, W to fill
// the time no F or B can use. This runs over two placements (stage s on worker
// s; two chunks per worker in a V, when the plan has the layers) and every L from
// 1 to 2p; the hand-made schedules within the limit compete too. The best then
// improves locally: swapping two neighbouring actions of a worker, kept when the
// simulated step gets shorter within the memory limit, until no swap helps or
// the budget of simulations is spent.
#pragma once

#include <string>

#include "partitioner/plan.h"
#include "partitioner/profile.h"
#include "partitioner/schedule.h"
#include "partitioner/simulator.h"

namespace pipetrain::partitioner {

struct SearchOptions {
  /// Per worker; 0: the largest peak of the hand-made flush schedules compared.
  double memory_limit_bytes = 0;
  int max_simulations = 3000;  // for the local improvement, from each of its two starts
  /// Where the candidates put the stages. kStraight: stage s on worker s only (the
  /// plan as it is), against the hand-made schedules of that placement, so that
  /// the result runs on the plan's own stages. kV: two chunks per worker in a V
  /// only, on a plan whose stage w is worker w's two chunks (interleaved_worker_view
  /// of a plan of 2p virtual stages), against the hand-made V's. kAny: both, and
  /// interleaved among the hand-made, each plan stage cut into chunks as simulate()
  /// cuts it.
  enum class Placements { kAny, kStraight, kV };
  Placements placements = Placements::kAny;
};

struct SearchResult {
  Schedule schedule;  // kind kFromFile: run it with SimOptions::schedule
  SimResult sim;
  std::string best_hand_made;  // the fastest hand-made flush schedule within the limit
  double best_hand_made_s = 0;
  double lower_bound_s = 0;  // the busiest worker's compute
  double memory_limit_bytes = 0;
  int simulations = 0;
};

/// Searches on `plan` (unreplicated stages) at options.microbatches per step.
/// Throws PlanError for replicated plans.
SearchResult search_schedule(const Plan& plan, const Profile& profile, const SimOptions& options,
                             const SearchOptions& search = {});

}  // namespace pipetrain::partitioner
