// A real ResNet (the zoo's ResNet-50 at 1/16 width, one node per layer):
// every cut's bytes are exactly the tensors produced at or before it and read
// after it, so the skip connections of all 16 bottleneck blocks are counted,
// and a 2-stage plan's boundary carries those bytes.
#include <gtest/gtest.h>

#include <map>

#include "importer/importer.h"
#include "models/zoo.h"
#include "partitioner/profile_ir.h"

namespace pipetrain {
namespace {

ir::Graph small_resnet50() {
  models::ZooOptions o;
  o.batch = 2;
  o.image_size = 64;
  o.width_divisor = 16;
  o.weights = false;
  importer::ImportOptions io;
  io.layer_depth = 0;  // one node per layer: cuts fall inside the residual blocks
  return importer::import_model_bytes(models::build_zoo_model("resnet50", o).SerializeAsString(),
                                      "", io);
}

TEST(ResnetCuts, EveryCrossingTensorIsCounted) {
  ir::Graph g = small_resnet50();
  const std::vector<int64_t> cut = partitioner::cut_bytes_per_layer(g);
  ASSERT_EQ(cut.size(), g.layers.size());
  // Brute force: the layer producing each activation, the last layer reading it.
  std::map<std::string, int> made, last_read;
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) made[o] = n.layer;
  for (const auto& n : g.nodes)
    for (const auto& in : n.inputs)
      if (made.count(in)) last_read[in] = std::max(last_read[in], n.layer);
  int cuts_with_skip = 0;
  for (size_t l = 0; l < cut.size(); ++l) {
    int64_t want = 0;
    int crossing = 0;
    for (const auto& [t, layer] : made)
      if (layer <= static_cast<int>(l) && last_read.count(t) && last_read[t] > static_cast<int>(l)) {
        want += static_cast<int64_t>(g.tensor(t).nbytes());
        ++crossing;
      }
    EXPECT_EQ(cut[l], want) << "cut after layer " << l << " (" << g.layers[l].name << ")";
    cuts_with_skip += crossing >= 2;
  }
  // Each bottleneck block's inner cuts carry its input (the skip) too: 16 blocks, several cuts each.
  EXPECT_GE(cuts_with_skip, 16 * 3);
}

}  // namespace
}  // namespace pipetrain
