// The table of shared (host/device) op implementations, instantiated per
// Exec policy: executor/portable runs it on the host (so the CPU tests check
// this code), executor/cuda on a GPU. Ops missing here are either host ops
// (shape metadata the host computes: Shape, Constant, ...) or library ops
// (GEMM, convolution, LSTM) that each backend maps to its library.
#pragma once

#include <map>
#include <set>
#include <string>

#include "executor/device/ops_attention.h"
#include "executor/device/ops_conv.h"
#include "executor/device/ops_elementwise.h"
#include "executor/device/ops_grid_sample.h"
#include "executor/device/ops_layout.h"
#include "executor/device/ops_norm.h"
#include "executor/device/ops_pool.h"
#include "executor/device/ops_reduce.h"
#include "executor/device/ops_resize.h"
#include "executor/device/ops_rnn.h"
#include "executor/device/ops_roi_align.h"
#include "executor/device/ops_scan.h"
#include "executor/device/ops_scatter.h"
#include "executor/device/ops_shape.h"

namespace pipetrain::exec::device {

template <typename Exec>
using DeviceOpFn = void (*)(Exec&, DeviceOpArgs&);

template <typename Exec>
const std::map<std::string, DeviceOpFn<Exec>>& device_ops() {
  static const std::map<std::string, DeviceOpFn<Exec>> table = {
      {"Add", &binary_op<AddOp, Exec>},
      {"Sub", &binary_op<SubOp, Exec>},
      {"Mul", &binary_op<MulOp, Exec>},
      {"Div", &binary_op<DivOp, Exec>},
      {"Pow", &pow_op<Exec>},
      {"Equal", &binary_op<EqualOp, Exec>},
      {"Less", &binary_op<LessOp, Exec>},
      {"Greater", &binary_op<GreaterOp, Exec>},
      {"Max", &variadic_op<MaxOp, Exec>},
      {"Min", &variadic_op<MinOp, Exec>},
      {"Sum", &variadic_op<AddOp, Exec>},
      {"Mean", &mean_op<Exec>},
      {"Mod",
       [](Exec& ex, DeviceOpArgs& a) {
         binary_op_with(ex, a, ModOp{a.n().attr_int("fmod", 0) != 0});
       }},
      {"PRelu", &binary_op<PReluOp, Exec>},
      {"Shrink",
       [](Exec& ex, DeviceOpArgs& a) {
         unary_op(ex, a, ShrinkFn{a.n().attr_float("lambd", 0.5f), a.n().attr_float("bias", 0.0f)});
       }},
      {"Trilu", &trilu_op<Exec>},
      {"Tile", &tile_op<Exec>},
      {"Hardmax", &hardmax_op<Exec>},
      {"EyeLike", &eye_like_op<Exec>},
      {"OneHot", &one_hot_op<Exec>},
      {"Resize", &resize_op<Exec>},
      {"ResizeGrad", &resize_grad_op<Exec>},
      {"GatherElements", &gather_elements_op<Exec>},
      {"ScatterElements", &scatter_elements_op<Exec>},
      {"GatherND", &gather_nd_op<Exec>},
      {"ScatterND", &scatter_nd_op<Exec>},
      {"ArgMax", &arg_max_op<Exec>},
      {"TopK", &top_k_op<Exec>},
      {"GridSample", &grid_sample_op<Exec>},
      {"GridSampleGrad", &grid_sample_grad_op<Exec>},
      {"RoiAlign", &roi_align_op<Exec>},
      {"RoiAlignGrad", &roi_align_grad_op<Exec>},
      {"ArgMin", &arg_min_op<Exec>},
      {"CumSum", &cum_sum_op<Exec>},
      {"And", &binary_op<AndOp, Exec>},
      {"Or", &binary_op<OrOp, Exec>},
      {"Xor", &binary_op<XorOp, Exec>},
      {"IsNaN", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, IsNaNFn{}); }},
      {"IsInf",
       [](Exec& ex, DeviceOpArgs& a) {
         unary_op(ex, a,
                  IsInfFn{a.n().attr_int("detect_negative", 1) != 0,
                          a.n().attr_int("detect_positive", 1) != 0});
       }},
      {"Tan", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, TanFn{}); }},
      {"Asin", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, AsinFn{}); }},
      {"Acos", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, AcosFn{}); }},
      {"Atan", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, AtanFn{}); }},
      {"Sinh", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, SinhFn{}); }},
      {"Cosh", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, CoshFn{}); }},
      {"Asinh", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, AsinhFn{}); }},
      {"Acosh", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, AcoshFn{}); }},
      {"Atanh", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, AtanhFn{}); }},
      {"Sqrt", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, SqrtFn{}); }},
      {"Neg", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, NegFn{}); }},
      {"Exp", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, ExpFn{}); }},
      {"Log", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, LogFn{}); }},
      {"Reciprocal", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, ReciprocalFn{}); }},
      {"Abs", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, AbsFn{}); }},
      {"Erf", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, ErfFn{}); }},
      {"Not", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, NotFn{}); }},
      {"Relu", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, ReluFn{}); }},
      {"LeakyRelu", &leaky_relu_op<Exec>},
      {"HardSigmoid", &hard_sigmoid_op<Exec>},
      {"Elu",
       [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, EluFn{a.n().attr_float("alpha", 1.0f)}); }},
      {"Selu",
       [](Exec& ex, DeviceOpArgs& a) {
         unary_op(ex, a,
                  SeluFn{a.n().attr_float("alpha", 1.67326319217681884765625f),
                         a.n().attr_float("gamma", 1.05070102214813232421875f)});
       }},
      {"Celu",
       [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, CeluFn{a.n().attr_float("alpha", 1.0f)}); }},
      {"ThresholdedRelu",
       [](Exec& ex, DeviceOpArgs& a) {
         unary_op(ex, a, ThresholdedReluFn{a.n().attr_float("alpha", 1.0f)});
       }},
      {"Softplus", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, SoftplusFn{}); }},
      {"Softsign", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, SoftsignFn{}); }},
      {"Mish", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, MishFn{}); }},
      {"Sin", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, SinFn{}); }},
      {"Cos", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, CosFn{}); }},
      {"Floor", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, FloorFn{}); }},
      {"Ceil", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, CeilFn{}); }},
      {"Round", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, RoundFn{}); }},
      {"Sign", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, SignFn{}); }},
      {"HardSwish", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, HardSwishFn{}); }},
      {"Sigmoid", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, SigmoidFn{}); }},
      {"Tanh", [](Exec& ex, DeviceOpArgs& a) { unary_op(ex, a, TanhFn{}); }},
      {"Gelu", &gelu_op<Exec>},
      {"Clip", &clip_op<Exec>},
      {"Dropout", &dropout_op<Exec>},
      {"Where", &where_op<Exec>},
      {"Cast", &cast_op<Exec>},
      {"CastLike", &cast_op<Exec>},
      {"GreaterOrEqual", &binary_op<GreaterOrEqualOp, Exec>},
      {"LessOrEqual", &binary_op<LessOrEqualOp, Exec>},
      {"ReluGrad", [](Exec& ex, DeviceOpArgs& a) { grad_op(ex, a, ReluGradFn{}); }},
      {"LeakyReluGrad", &leaky_relu_grad_op<Exec>},
      {"HardSigmoidGrad", &hard_sigmoid_grad_op<Exec>},
      {"HardSwishGrad", [](Exec& ex, DeviceOpArgs& a) { grad_op(ex, a, HardSwishGradFn{}); }},
      {"SigmoidGrad", [](Exec& ex, DeviceOpArgs& a) { grad_op(ex, a, SigmoidGradFn{}); }},
      {"TanhGrad", [](Exec& ex, DeviceOpArgs& a) { grad_op(ex, a, TanhGradFn{}); }},
      {"GeluGrad", &gelu_grad_op<Exec>},
      {"ClipGrad", &clip_grad_op<Exec>},
      {"DropoutGrad", &dropout_grad_op<Exec>},
      {"Flatten", &copy_op<Exec>},
      {"Reshape", &copy_op<Exec>},
      {"Squeeze", &copy_op<Exec>},
      {"Unsqueeze", &copy_op<Exec>},
      {"Identity", &copy_op<Exec>},
      {"Transpose", &transpose_op<Exec>},
      {"Expand", &expand_op<Exec>},
      {"Concat", &concat_op<Exec>},
      {"Split", &split_op<Exec>},
      {"Slice", &slice_op<Exec>},
      {"SliceGrad", &slice_grad_op<Exec>},
      {"Gather", &gather_op<Exec>},
      {"GatherGrad", &gather_grad_op<Exec>},
      {"Pad", &pad_op<Exec>},
      {"ReduceSum", &reduce_op<Reduce::kSum, Exec>},
      {"ReduceMean", &reduce_op<Reduce::kMean, Exec>},
      {"ReduceMax", &reduce_op<Reduce::kMax, Exec>},
      {"ReduceMin", &reduce_op<Reduce::kMin, Exec>},
      {"ReduceProd", &reduce_op<Reduce::kProd, Exec>},
      {"ReduceL1", &reduce_op<Reduce::kL1, Exec>},
      {"ReduceL2", &reduce_op<Reduce::kL2, Exec>},
      {"ReduceSumSquare", &reduce_op<Reduce::kSumSquare, Exec>},
      {"ReduceLogSum", &reduce_op<Reduce::kLogSum, Exec>},
      {"ReduceLogSumExp", &reduce_op<Reduce::kLogSumExp, Exec>},
      {"Softmax", &softmax_op<false, Exec>},
      {"LogSoftmax", &softmax_op<true, Exec>},
      {"SoftmaxGrad", &softmax_grad_op<false, Exec>},
      {"LogSoftmaxGrad", &softmax_grad_op<true, Exec>},
      {"SoftmaxCrossEntropyLoss", &sce_op<Exec>},
      {"NegativeLogLikelihoodLoss", &nll_op<Exec>},
      {"SoftmaxCrossEntropyLossGrad", &loss_grad_op<true, Exec>},
      {"NegativeLogLikelihoodLossGrad", &loss_grad_op<false, Exec>},
      {"BatchNormalization", &batch_norm_op<Exec>},
      {"BatchNormalizationGrad", &batch_norm_grad_op<Exec>},
      {"LayerNormalization", &layer_norm_op<Exec>},
      {"LayerNormalizationGrad", &layer_norm_grad_op<Exec>},
      {"MaxPool", &max_pool_op<Exec>},
      {"AveragePool", &average_pool_op<Exec>},
      {"GlobalAveragePool", &global_average_pool_op<Exec>},
      {"MaxPoolGrad", &max_pool_grad_op<Exec>},
      {"AveragePoolGrad", &average_pool_grad_op<Exec>},
      {"Conv", &conv_op<false, Exec>},
      {"ConvTranspose", &conv_op<true, Exec>},
      {"ConvGrad", &conv_grad_op<false, Exec>},
      {"ConvTransposeGrad", &conv_grad_op<true, Exec>},
      {"LSTM", &lstm_op<Exec>},
      {"LSTMGrad", &lstm_grad_op<Exec>},
      {"Attention", &attention_op<Exec>},
      {"AttentionGrad", &attention_grad_op<Exec>},
  };
  return table;
}

/// Shape metadata the host computes from host inputs (attributes, shapes):
/// backends run the CPU kernel for these and move the small result.
inline const std::set<std::string>& host_ops() {
  static const std::set<std::string> ops = {"Shape", "Size", "Constant", "ConstantOfShape",
                                            "Range"};
  return ops;
}

}  // namespace pipetrain::exec::device
