// PipeDream's profile format, graph.txt: one line per node
//   node<id> -- <description> -- forward_compute_time=<ms>, backward_compute_time=<ms>,
//   activation_size=<bytes>, parameter_size=<bytes>
// then one line per edge, "\tnode<a> -- node<b>". Read and written so that the
// partitioner runs on the same inputs as the reference optimizer.
#pragma once

#include <string>

#include "partitioner/profile.h"

namespace pipetrain::partitioner {

/// Parses graph.txt. Like the reference optimizer, source nodes whose
/// description starts with "Input" and sink nodes starting with "__getitem__"
/// are dropped. The remaining nodes become layers in a topological order (ties
/// in file order); a layer's cut_bytes is the activation_size of every node at
/// or before it with an edge to a node after it. Throws PlanError naming the
/// line on malformed input, unknown node ids or a cycle. `what` names the
/// source in messages.
Profile read_graph_txt(const std::string& text, const std::string& what = "graph.txt");

/// Writes graph.txt: an "Input0" source feeding the layers with no in-edges,
/// then one node per layer (times in ms with 6 decimals), then the edges
/// (profile.edges, or a chain when there are none).
std::string write_graph_txt(const Profile& p);

}  // namespace pipetrain::partitioner
