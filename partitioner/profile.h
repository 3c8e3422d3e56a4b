// Profile: what the partitioner knows about one model at one batch size, per
// layer (the partitioning unit): forward/backward seconds, the bytes of the
// layer's outputs, the bytes of every tensor that crosses a cut placed right
// after it, and its parameter bytes. Saved and loaded as JSON.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace pipetrain::partitioner {

struct LayerProfile {
  std::string name;
  double forward_s = 0;   // one minibatch, forward
  double backward_s = 0;  // one minibatch, backward (input and weight gradients)
  /// Activations stashed for this layer per minibatch in flight: with
  /// Profile::stash_at_readers, the forward tensors whose first backward
  /// reader is this layer's (what a pipeline worker keeps, received ones
  /// included); else every activation the layer produces (PipeDream's
  /// activation_size; a stage then also stashes its input).
  int64_t output_bytes = 0;
  /// Bytes of every tensor produced at or before this layer and read after it
  /// (skip connections included): what a cut after this layer must send.
  int64_t cut_bytes = 0;
  int64_t param_bytes = 0;
  std::vector<std::string> nodes;  // IR node names (empty for graph.txt profiles)
  double update_s = 0;             // one optimizer step over the layer's params (0: not measured)
  /// Adding one microbatch's gradients of the layer's params into the step's
  /// sum (what every backward but the first of a step costs with
  /// microbatches; 0: not measured).
  double accumulate_s = 0;
  /// With Profile::stash_at_readers: bytes of the tensors a stage starting
  /// after this layer stashes besides its layers' output_bytes (received
  /// ones its backward reads whose first reader lies before the cut).
  int64_t cut_stash_bytes = 0;
  /// Bytes of the graph's data inputs (features, labels) first read by this
  /// layer's forward: what a recomputing stage keeps per microbatch in
  /// flight besides what it receives.
  int64_t input_bytes = 0;
  /// The part of backward_s that computes gradients of activations (the
  /// layer's inputs and what leads to them) rather than of its params: what
  /// a zero-bubble schedule's B op runs, W running the rest. A stage whose
  /// input is the model's data runs all its backward as W. Negative: not
  /// measured (the simulator takes half of backward_s).
  double backward_input_s = -1;
  /// The weight part of the backward (backward_s - backward_input_s) run once
  /// over a whole minibatch, as one batched W op of a step runs it: wide
  /// products in place of one narrow product per microbatch, so less than
  /// the per-microbatch W's share of backward_s. Per step (scale_profile()
  /// leaves it). Negative: not measured (the simulator takes that share).
  double backward_weight_step_s = -1;
  /// Bytes a zero-bubble schedule keeps per microbatch from B to W for this
  /// layer: activation gradients B makes that W reads here (at their last
  /// W reader's layer).
  int64_t carry_bytes = 0;
};

/// A stashed forward tensor that the weight part of some layer's backward
/// reads. A stage keeps it from B to W (a split or batched backward frees
/// the rest at B) only where one of those weight readers lies in the stage:
/// a Relu stage stashes its output for its own ReluGrad (input half) while
/// the next stage's dW reads the copy it received.
struct WeightRead {
  std::string name;
  int64_t bytes = 0;
  int first_reader = 0;             // layer of its first backward reader (its stash)
  int last_reader = 0;              // and of its last
  std::vector<int> weight_readers;  // layers whose weight part reads it, ascending
};

/// A parameter read by more than one layer (tied weights: GPT's token
/// embedding and LM head). Cut apart, the stages holding its readers each keep
/// a copy and allreduce its gradient before every update.
struct TiedParam {
  std::string name;
  int64_t bytes = 0;
  std::vector<int> layers;  // the layers that read it, ascending
};

struct Profile {
  std::string model;
  std::string source;  // "analytic", "measured" or "graph.txt"
  std::string device;  // device spec name, backend name or "" for graph.txt
  int64_t batch = 0;   // 0: unknown
  /// True when backward times are 2 x forward, not measured.
  bool backward_estimated = false;
  /// LayerProfile::output_bytes counts what the backward reads, at its
  /// reader (profiles of a training graph), so a stage's input is in it.
  bool stash_at_readers = false;
  std::vector<LayerProfile> layers;  // in a topological order: the chain the DP cuts
  /// Data edges between layers (from, to), from < to; used to write graph.txt.
  std::vector<std::pair<int, int>> edges;
  std::vector<TiedParam> tied;
  /// Whether weight_reads is known (profiles of a training graph); unknown,
  /// a split backward keeps its whole stash until W.
  bool weight_reads_known = false;
  std::vector<WeightRead> weight_reads;

  double compute_s() const;  // sum of forward + backward
  int64_t param_bytes() const;
  /// Index of the layer with this name, -1 if absent.
  int find_layer(const std::string& name) const;
  /// Of the stash of a stage over layers [first, last] (its own tensors and
  /// those received whose first reader is upstream), the bytes its weight
  /// part reads; negative where weight_reads is not known.
  int64_t weight_stash_bytes(int first, int last) const;
};

/// Throws PlanError naming the layer and field on negative or non-finite
/// values, an empty profile, duplicate names or edges that go backwards.
void validate(const Profile& p);

nlohmann::json to_json(const Profile& p);
/// Throws PlanError (what is missing or malformed, with the layer index).
Profile profile_from_json(const nlohmann::json& j);

/// Loads a profile: `.txt` files as PipeDream graph.txt, anything else as JSON.
Profile load_profile(const std::string& path);
/// Writes JSON through a temporary file and a rename.
void save_profile(const Profile& p, const std::string& path);

/// Writes text to path via a temporary file and a rename (no half-written
/// outputs); throws RuntimeFault naming the path.
void write_file_atomically(const std::string& path, const std::string& text);
/// Reads a whole file; throws PlanError naming the path if it cannot.
std::string read_text_file(const std::string& path);

}  // namespace pipetrain::partitioner
