// The window functions (HannWindow, HammingWindow, BlackmanWindow) become
// constants at import: the exact window, periodic or symmetric, rounded to
// float32 once. ONNX's own expected outputs are off by up to 5e-4, so this is
// the check that ours are right.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/importer/model_util.h"

namespace pipetrain {
namespace {

std::vector<float> window(const std::string& op, int64_t size, int64_t periodic) {
  ir::Graph g = test::import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g () => (float[)" + std::to_string(size) +
                                  R"(] y)
<int64 n = {)" + std::to_string(size) +
                                  R"(}>
{
  y = )" + op + " <periodic = " + std::to_string(periodic) +
                                  R"(> (n)
}
)");
  const ir::Tensor* v = g.value("y");
  if (v == nullptr) {  // not folded: the Identity of the constant
    for (const auto& node : g.nodes)
      if (node.outputs[0] == "y") v = g.value(node.inputs[0]);
  }
  if (v == nullptr) return {};
  return std::vector<float>(v->data<float>(), v->data<float>() + v->numel());
}

TEST(Window, ExactValuesPeriodicAndSymmetric) {
  const double pi = std::acos(-1.0);
  struct W {
    std::string op;
    double a0, a1, a2;
  };
  for (const W& w : {W{"HannWindow", 0.5, 0.5, 0}, W{"HammingWindow", 25.0 / 46, 21.0 / 46, 0},
                     W{"BlackmanWindow", 0.42, 0.5, 0.08}}) {
    for (int64_t periodic : {0, 1}) {
      const int64_t size = 10;
      const std::vector<float> got = window(w.op, size, periodic);
      ASSERT_EQ(got.size(), static_cast<size_t>(size)) << w.op;
      const double n = periodic ? size : size - 1;
      for (int64_t k = 0; k < size; ++k) {
        const double x = 2 * pi * static_cast<double>(k) / n;
        const double want = w.a0 - w.a1 * std::cos(x) + w.a2 * std::cos(2 * x);
        EXPECT_NEAR(got[k], want, 1e-7) << w.op << " periodic " << periodic << " k " << k;
        if (!periodic) {
          EXPECT_EQ(got[k], got[size - 1 - k]) << w.op << " is symmetric";
        }
      }
    }
  }
}

}  // namespace
}  // namespace pipetrain
