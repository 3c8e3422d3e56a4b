// GRU and RNN unrolled at import (importer/rnn_expansions.cc). ONNX's node
// tests check the plain forms against their expected outputs and the PyTorch
// reference checks a bidirectional GRU's outputs and gradients; here the
// forms neither covers: constant sequence_lens (every batch entry must equal
// a run over its own length alone, in both directions), and the refusals.
#include <gtest/gtest.h>

#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "tests/importer/model_util.h"

namespace pipetrain {
namespace {

using test::filled;

using test::error_of;

std::string replaced(std::string s, const std::string& key, const std::string& value) {
  for (size_t at; (at = s.find(key)) != std::string::npos;) s.replace(at, key.size(), value);
  return s;
}

/// A bidirectional GRU (hidden 3, linear_before_reset, with B and initial_h)
/// over X (seq, batch, 4); `lens` (if not empty) is a constant sequence_lens.
ir::Graph gru(int64_t seq, int64_t batch, const std::string& lens) {
  std::string text = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[$S, $B, 4] X, float[2, 9, 4] W, float[2, 9, 3] R, float[2, 18] Bias,
   float[2, $B, 3] H0) => (float[$S, 2, $B, 3] Y, float[2, $B, 3] Y_h)
$DECL
{
  Y, Y_h = GRU <hidden_size = 3, direction = "bidirectional", linear_before_reset = 1>
               (X, W, R, Bias, $LENS, H0)
}
)";
  text = replaced(text, "$DECL", lens.empty() ? "" : "<int32[$B] lens = {" + lens + "}>");
  text = replaced(text, "$LENS", lens.empty() ? "" : "lens");
  text = replaced(text, "$S", std::to_string(seq));
  return test::import_text(replaced(text, "$B", std::to_string(batch)));
}

std::map<std::string, ir::Tensor> run(const ir::Graph& g, std::map<std::string, ir::Tensor> feeds) {
  auto backend = exec::make_cpu_backend();
  return exec::ForwardRunner(g, *backend).run(feeds);
}

/// Equal up to the GEMMs' summation order: BLAS may sum a batch of 2 and a
/// batch of 1 in different orders (OpenBLAS's Haswell kernels do), so the
/// same state differs in its last bits; a wrong mask moves it by 0.01 or more.
void expect_same_state(const std::vector<float>& got, const std::vector<float>& want,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6) << what << " [" << i << "]";
}

/// The index-th run of `hidden` values: one (direction, batch entry) state.
std::vector<float> hidden_of(const ir::Tensor& t, int64_t index, int64_t hidden) {
  return std::vector<float>(t.data<float>() + index * hidden,
                            t.data<float>() + (index + 1) * hidden);
}

// Batch entry 0 runs 2 of 3 steps, entry 1 all 3: each must equal a run of
// the same GRU over its own steps alone; Y is zero past a length.
TEST(RnnExpansion, ConstantSequenceLengthsMaskEachBatchEntry) {
  const int64_t seq = 3, batch = 2, hidden = 3;
  const ir::Tensor x = filled({seq, batch, 4}, 1), w = filled({2, 9, 4}, 2),
                   r = filled({2, 9, 3}, 3), bias = filled({2, 18}, 4),
                   h0 = filled({2, batch, hidden}, 5);
  const auto masked =
      run(gru(seq, batch, "2, 3"), {{"X", x}, {"W", w}, {"R", r}, {"Bias", bias}, {"H0", h0}});
  const auto full =
      run(gru(seq, batch, ""), {{"X", x}, {"W", w}, {"R", r}, {"Bias", bias}, {"H0", h0}});
  // Entry 0 alone over its first 2 steps (batch 1: X[:2, 0], H0[:, 0]).
  ir::Tensor x0(ir::DType::kF32, {2, 1, 4}), h00(ir::DType::kF32, {2, 1, hidden});
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t i = 0; i < 4; ++i)
      x0.data<float>()[t * 4 + i] = x.data<float>()[t * batch * 4 + i];
  for (int64_t d = 0; d < 2; ++d)
    for (int64_t k = 0; k < hidden; ++k)
      h00.data<float>()[d * hidden + k] = h0.data<float>()[d * batch * hidden + k];
  const auto alone =
      run(gru(2, 1, ""), {{"X", x0}, {"W", w}, {"R", r}, {"Bias", bias}, {"H0", h00}});

  const ir::Tensor &y = masked.at("Y"), &y_h = masked.at("Y_h");
  for (int64_t d = 0; d < 2; ++d) {
    // Y_h (dir, batch, hidden): entry 0 as alone, entry 1 as the unmasked run.
    expect_same_state(hidden_of(y_h, d * batch, hidden), hidden_of(alone.at("Y_h"), d, hidden),
                      "Y_h entry 0 dir " + std::to_string(d));
    expect_same_state(hidden_of(y_h, d * batch + 1, hidden),
                      hidden_of(full.at("Y_h"), d * batch + 1, hidden),
                      "Y_h entry 1 dir " + std::to_string(d));
    // Y (seq, dir, batch, hidden): entry 0 as alone for t < 2, zero at t = 2.
    for (int64_t t = 0; t < seq; ++t) {
      const auto got = hidden_of(y, (t * 2 + d) * batch, hidden);
      if (t < 2)
        expect_same_state(got, hidden_of(alone.at("Y"), t * 2 + d, hidden),
                          "Y t " + std::to_string(t) + " dir " + std::to_string(d));
      else
        EXPECT_EQ(got, std::vector<float>(hidden, 0.f)) << "dir " << d;
    }
  }
}

TEST(RnnExpansion, RefusesWhatCannotBeUnrolled) {
  const std::string dynamic_lens = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[3, 2, 4] X, float[1, 3, 4] W, float[1, 3, 3] R, int32[2] lens) => (float[1, 2, 3] Y_h)
{
  Y, Y_h = RNN <hidden_size = 3> (X, W, R, , lens)
}
)";
  auto msg = error_of<ModelError>([&] { test::import_text(dynamic_lens); });
  EXPECT_NE(msg.find("RNN"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sequence_lens 'lens' is not a constant"), std::string::npos) << msg;

  const std::string bad_activation = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[3, 2, 4] X, float[1, 3, 4] W, float[1, 3, 3] R) => (float[1, 2, 3] Y_h)
{
  Y, Y_h = RNN <hidden_size = 3, activations = ["Gelu"]> (X, W, R)
}
)";
  msg = error_of<ModelError>([&] { test::import_text(bad_activation); });
  EXPECT_NE(msg.find("activation 'Gelu' is not an ONNX recurrent activation"), std::string::npos)
      << msg;

  const std::string bad_weight = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[3, 2, 4] X, float[1, 9, 5] W, float[1, 9, 3] R) => (float[1, 2, 3] Y_h)
{
  Y, Y_h = GRU <hidden_size = 3> (X, W, R)
}
)";
  msg = error_of<ModelError>([&] { test::import_text(bad_weight); });
  EXPECT_NE(msg.find("W (1, 9, 5) is not (1, 9, 4)"), std::string::npos) << msg;
}

}  // namespace
}  // namespace pipetrain
