// Gradient of LSTM: one fused LSTMGrad that recomputes the forward gates and
// runs backpropagation through time.
#include "autodiff/grad_builder.h"

namespace pipetrain::autodiff {

namespace {

// Inputs (X, W, R, B, sequence_lens, initial_h, initial_c, P); gradients for
// X, W, R, B, initial_h, initial_c. Peepholes P get none (refused when wanted).
void lstm_grad(GradBuilder& b) {
  if (b.wants(7)) b.unsupported("peephole weights P");
  std::vector<std::string> in;
  for (size_t i = 0; i < 8; ++i) in.push_back(b.has_I(i) ? b.I(i) : "");
  for (size_t k = 0; k < 3; ++k) in.push_back(b.has_GO(k) ? b.GO(k) : "");
  static const size_t kInput[] = {0, 1, 2, 3, 5, 6};
  std::vector<bool> skip;
  for (size_t k = 0; k < 6; ++k) skip.push_back(!b.wants(kInput[k]));
  auto outs = b.emit("LSTMGrad", in, 6, b.node().attrs, skip);
  for (size_t k = 0; k < 6; ++k)
    if (!outs[k].empty()) b.set_GI(kInput[k], outs[k]);
}

}  // namespace

void register_rnn_rules(std::map<std::string, RuleEntry>& r) {
  r["LSTM"] = {lstm_grad};
}

}  // namespace pipetrain::autodiff
