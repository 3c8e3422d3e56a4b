// ONNX operators pipetrain runs by expanding them at import into ops it has
// (their definitions in the ONNX specification are such expansions):
// DepthToSpace, SpaceToDepth, InstanceNormalization, MeanVarianceNormalization,
// LpNormalization, GlobalMaxPool, and GRU and RNN unrolled over their static
// sequence length (rnn_expansions.cc), Einsum (einsum_expansion.cc), and
// control flow with a constant condition or trip count: If, Loop, Scan
// (control_flow.cc), DFT, STFT and MelWeightMatrix (spectral_expansions.cc),
// TfIdfVectorizer on integer tokens (tfidf_expansion.cc). Gradients, device
// kernels and the partitioner then come from the ops they expand into.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace pipetrain::importer {

struct Expansion {
  std::string into;  // the ops it becomes, for `inspect --ops`
  /// The replacement nodes in topological order (n's outputs keep their
  /// names); new constants go into g, new names are taken from `taken`.
  /// Throws ModelError naming the node for bad attributes or shapes.
  std::vector<ir::Node> (*expand)(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken);
};

namespace detail {
std::vector<ir::Node> expand_gru(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken);
std::vector<ir::Node> expand_rnn(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken);
std::vector<ir::Node> expand_if(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken);
std::vector<ir::Node> expand_loop(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken);
std::vector<ir::Node> expand_scan(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken);
std::vector<ir::Node> expand_dft(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken);
std::vector<ir::Node> expand_stft(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken);
std::vector<ir::Node> expand_mel_weight_matrix(ir::Graph& g, const ir::Node& n,
                                               std::set<std::string>& taken);
std::vector<ir::Node> expand_einsum(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken);
std::vector<ir::Node> expand_tfidf(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken);
}  // namespace detail

/// The expanded ops by name.
const std::map<std::string, Expansion>& expanded_ops();

}  // namespace pipetrain::importer
