// The preview training domain's Gradient op, written at import by pipetrain's
// autodiff: the gradients of a non-scalar y (summed, as ONNX's reference
// sums) with respect to a runtime input and a weight, against the closed form.
#include <gtest/gtest.h>

#include <cmath>

#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "tests/importer/model_util.h"

namespace pipetrain {
namespace {

// y = tanh(x * w): d sum(y) / dx = w (1 - y^2), d sum(y) / dw = x (1 - y^2).
TEST(GradientOp, SumsANonScalarYThroughTheGraph) {
  ir::Graph g = test::import_text(R"(
<ir_version: 8, opset_import: ["" : 17, "ai.onnx.preview.training" : 1]>
g (float[3] x) => (float[3] y, float[3] dx, float[3] dw)
<float[3] w = {0.5, -2.0, 1.5}>
{
  p = Mul(x, w)
  y = Tanh(p)
  dx, dw = ai.onnx.preview.training.Gradient <xs = ["x", "w"], y = "y"> (x, w)
}
)");
  for (const auto& n : g.nodes) EXPECT_EQ(n.op_type.find("Gradient"), std::string::npos) << n.name;
  const std::vector<float> x = {0.3f, -0.7f, 1.1f}, w = {0.5f, -2.0f, 1.5f};
  auto backend = exec::make_cpu_backend();
  auto out = exec::ForwardRunner(g, *backend).run({{"x", ir::Tensor::from_f32(x, {3})}});
  for (size_t i = 0; i < 3; ++i) {
    const double y = std::tanh(static_cast<double>(x[i]) * w[i]), slope = 1 - y * y;
    EXPECT_NEAR(out.at("dx").data<float>()[i], w[i] * slope, 1e-6) << i;
    EXPECT_NEAR(out.at("dw").data<float>()[i], x[i] * slope, 1e-6) << i;
  }
}

}  // namespace
}  // namespace pipetrain
