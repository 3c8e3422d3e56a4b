// Layers from node-name scopes: contiguous in topological order, grouped
// wherever dependencies allow.
#include <gtest/gtest.h>

#include "importer/internal.h"
#include "ir/error.h"

namespace pipetrain {
namespace {

std::string tensor_name(size_t i) {
  std::string name("t");
  name += std::to_string(i);
  return name;
}

// A chain or DAG of Relu nodes; `deps[i]` lists the nodes node i reads
// (empty: it reads the graph input).
ir::Graph relu_graph(const std::vector<std::string>& names,
                     const std::vector<std::vector<size_t>>& deps) {
  ir::Graph g;
  g.set_tensor({"x", ir::DType::kF32, {2}, ir::Role::kInput});
  g.inputs = {"x"};
  for (size_t i = 0; i < names.size(); ++i) {
    ir::Node n{names[i], deps[i].size() > 1 ? "Add" : "Relu", {}, {tensor_name(i)}, {}};
    if (deps[i].empty()) n.inputs.push_back("x");
    for (size_t d : deps[i]) n.inputs.push_back(tensor_name(d));
    g.nodes.push_back(n);
  }
  g.infer_shapes();
  return g;
}

std::vector<std::string> layer_names(const ir::Graph& g) {
  std::vector<std::string> r;
  for (const auto& l : g.layers) r.push_back(l.name);
  return r;
}

std::vector<std::string> node_order(const ir::Graph& g) {
  std::vector<std::string> r;
  for (const auto& n : g.nodes) r.push_back(n.name);
  return r;
}

TEST(Layering, DepthZeroIsOneNodePerLayer) {
  ir::Graph g = relu_graph({"/a/Relu", "/b/Relu"}, {{}, {0}});
  importer::detail::assign_layers(g, 0);
  EXPECT_EQ(layer_names(g), (std::vector<std::string>{"/a/Relu", "/b/Relu"}));
  EXPECT_EQ(g.nodes[1].layer, 1);
}

TEST(Layering, GroupsByScopePrefix) {
  ir::Graph g =
      relu_graph({"/conv1/Conv", "/layer1/layer1.0/conv1/Conv", "/layer1/layer1.0/relu/Relu",
                  "/layer1/layer1.1/conv1/Conv", "/layer1/Add", "/fc/Gemm"},
                 {{}, {0}, {1}, {2}, {3}, {4}});
  importer::detail::assign_layers(g, 2);
  // "/conv1/Conv" has one scope, "/layer1/Add" one: they group by what they have.
  EXPECT_EQ(layer_names(g),
            (std::vector<std::string>{"conv1", "layer1.0", "layer1.1", "layer1", "fc"}));
  EXPECT_EQ(g.layers[1].nodes, (std::vector<size_t>{1, 2}));
  g.verify();

  importer::detail::assign_layers(g, 1);
  EXPECT_EQ(layer_names(g), (std::vector<std::string>{"conv1", "layer1", "fc"}));
  EXPECT_EQ(g.layers[1].nodes.size(), 4u);
}

TEST(Layering, ReordersToKeepGroupsContiguous) {
  // File order interleaves two independent branches; a topological order
  // that keeps each together exists, so no group is split.
  ir::Graph g = relu_graph({"/a/x/Relu", "/b/x/Relu", "/a/y/Relu", "/b/y/Relu", "/Add"},
                           {{}, {}, {0}, {1}, {2, 3}});
  importer::detail::assign_layers(g, 1);
  EXPECT_EQ(layer_names(g), (std::vector<std::string>{"a", "b", "/Add"}));
  EXPECT_EQ(node_order(g),
            (std::vector<std::string>{"/a/x/Relu", "/a/y/Relu", "/b/x/Relu", "/b/y/Relu", "/Add"}));
  g.verify();
}

TEST(Layering, SplitsAGroupOnlyWhenItTrulyInterleaves) {
  // a -> b -> a: the second run of scope "a" depends on "b", so it becomes
  // its own layer.
  ir::Graph g = relu_graph({"/a/first/Relu", "/b/Relu", "/a/second/Relu"}, {{}, {0}, {1}});
  importer::detail::assign_layers(g, 1);
  EXPECT_EQ(layer_names(g), (std::vector<std::string>{"a", "b", "a#2"}));
}

TEST(Layering, UnscopedNamesAreTheirOwnLayers) {
  ir::Graph g = relu_graph({"Conv_0", "Relu_1"}, {{}, {0}});
  importer::detail::assign_layers(g, 3);
  EXPECT_EQ(layer_names(g), (std::vector<std::string>{"Conv_0", "Relu_1"}));
}

TEST(Layering, NegativeDepthIsAnError) {
  ir::Graph g = relu_graph({"a"}, {{}});
  EXPECT_THROW(importer::detail::assign_layers(g, -1), ModelError);
}

}  // namespace
}  // namespace pipetrain
