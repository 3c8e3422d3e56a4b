// The attribute checks of LSTMGrad, shared by the CPU and device kernels.
#pragma once

#include "ir/node.h"

namespace pipetrain::exec::cpu {

/// Refuses what the LSTM shape rule refuses (LSTMGrad's schema shares only
/// the attribute list): ModelError / UnsupportedOp naming the node.
void check_lstm_grad_attrs(const ir::Node& n);

}  // namespace pipetrain::exec::cpu
