// The table of gradient cases: every differentiable op over shapes,
// broadcasts and attributes. Used by the finite-difference check and by the
// dirty-arena check of the planned runner.
#pragma once

#include <functional>

#include "tests/autodiff/grad_check.h"

namespace pipetrain::test {
namespace grad_cases {

using ir::Attribute;
using A = std::map<std::string, Attribute>;
using G = Gen;

inline Attribute I(int64_t v) {
  return Attribute(v);
}
inline Attribute Is(std::vector<int64_t> v) {
  return Attribute(std::move(v));
}
inline Attribute F(float v) {
  return Attribute(v);
}
inline Attribute S(std::string v) {
  return Attribute(std::move(v));
}
inline Arg Ints(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return C(ir::Tensor::from_i64(v, {n}));
}
inline Arg IntsShaped(std::vector<int64_t> v, ir::Shape s) {
  return C(ir::Tensor::from_i64(v, std::move(s)));
}
inline Arg Scalar(float v) {
  return C(ir::Tensor::scalar_f32(v));
}
inline Arg Bools(std::vector<int64_t> v, ir::Shape s) {
  ir::Tensor t(ir::DType::kBool, std::move(s));
  for (size_t i = 0; i < v.size(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(v[i]);
  return C(t);
}

inline GradCase K(std::string name, std::string op, std::vector<Arg> args, A attrs = {}) {
  GradCase c;
  c.name = std::move(name);
  c.op = std::move(op);
  c.args = std::move(args);
  c.attrs = std::move(attrs);
  return c;
}
inline GradCase with(GradCase c, const std::function<void(GradCase&)>& f) {
  f(c);
  return c;
}

inline std::vector<GradCase> elementwise_cases() {
  return {
      K("add", "Add", {P({2, 3}), P({2, 3})}),
      K("add_bcast", "Add", {P({2, 3, 4}), P({3, 1})}),
      K("add_bcast_rank", "Add", {P({4}), P({2, 3, 4})}),
      K("sub_bcast", "Sub", {P({2, 1, 4}), P({3, 4})}),
      K("mul_bcast", "Mul", {P({2, 3, 4}), P({1, 3, 1})}),
      K("mul_const", "Mul", {P({3, 4}), C(ir::Tensor::scalar_f32(0.7f))}),
      K("div_bcast", "Div", {P({2, 3}), P({3}, G::kPositive)}),
      K("pow", "Pow", {P({2, 3}, G::kPositive), P({2, 3})}),
      K("pow_const", "Pow", {P({2, 3}), Scalar(2.0f)}),
      K("max", "Max", {P({2, 5}, G::kDistinct), P({2, 5}, G::kUniform)}),
      K("min_bcast", "Min", {P({2, 5}, G::kDistinct), P({5}, G::kUniform)}),
      K("sqrt", "Sqrt", {P({7}, G::kPositive)}),
      K("neg", "Neg", {P({2, 2})}),
      K("exp", "Exp", {P({2, 3})}),
      K("log", "Log", {P({2, 3}, G::kPositive)}),
      K("reciprocal", "Reciprocal", {P({4}, G::kPositive)}),
      K("abs", "Abs", {P({3, 3}, G::kAwayFromZero)}),
      K("erf", "Erf", {P({3, 4})}),
      K("sin", "Sin", {P({3, 4})}),
      K("cos", "Cos", {P({3, 4})}),
      K("tan", "Tan", {P({3, 4})}),
      K("asin", "Asin", {P({3, 4}, G::kHalf)}),
      K("acos", "Acos", {P({3, 4}, G::kHalf)}),
      K("atan", "Atan", {P({3, 4})}),
      K("sinh", "Sinh", {P({3, 4})}),
      K("cosh", "Cosh", {P({3, 4})}),
      K("asinh", "Asinh", {P({3, 4})}),
      K("acosh", "Acosh", {P({3, 4}, G::kAboveOne)}),
      K("atanh", "Atanh", {P({3, 4}, G::kHalf)}),
      K("mod_fmod", "Mod", {P({2, 3}, G::kPositive), P({3}, G::kPositive)}, {{"fmod", I(1)}}),
      K("mod_floor_bcast", "Mod", {P({2, 3}), P({3}, G::kAwayFromZero)}),
      K("sum3_bcast", "Sum", {P({2, 3}), P({3}), P({2, 1})}),
      K("mean3_bcast", "Mean", {P({2, 3}), P({3}), P({2, 1})}),
      K("where", "Where", {Bools({1, 0, 0, 1, 1, 0}, {2, 3}), P({2, 3}), P({3})}),
      K("cast", "Cast", {P({2, 3})}, {{"to", I(1)}}),
      K("cast_like", "CastLike", {P({2, 3}), C(ir::Tensor::from_f32({0}, {1}))}),
  };
}

inline std::vector<GradCase> activation_cases() {
  return {
      K("relu", "Relu", {P({2, 3, 4}, G::kAwayFromZero)}),
      K("leaky_relu", "LeakyRelu", {P({3, 4}, G::kAwayFromZero)}, {{"alpha", F(0.1f)}}),
      // alpha 0.8, beta 0.3: kinks at -0.375 and 0.875, inside the values' [-1, 1].
      K("hard_sigmoid", "HardSigmoid", {P({4, 5}, G::kDistinct)},
        {{"alpha", F(0.8f)}, {"beta", F(0.3f)}}),
      K("hard_swish", "HardSwish", {P({3, 4})}),
      K("elu", "Elu", {P({3, 4}, G::kAwayFromZero)}, {{"alpha", F(0.7f)}}),
      K("selu", "Selu", {P({3, 4}, G::kAwayFromZero)}),
      K("celu", "Celu", {P({3, 4}, G::kAwayFromZero)}, {{"alpha", F(1.5f)}}),
      K("thresholded_relu", "ThresholdedRelu", {P({4, 5}, G::kDistinct)}, {{"alpha", F(0.33f)}}),
      K("softplus", "Softplus", {P({3, 4})}),
      K("softsign", "Softsign", {P({3, 4}, G::kAwayFromZero)}),
      K("mish", "Mish", {P({3, 4})}),
      K("prelu_channel", "PRelu", {P({2, 3, 4}, G::kAwayFromZero), P({3, 1})}),
      K("shrink", "Shrink", {P({4, 5}, G::kDistinct)}, {{"lambd", F(0.35f)}, {"bias", F(0.2f)}}),
      K("sigmoid", "Sigmoid", {P({3, 4})}),
      K("tanh", "Tanh", {P({3, 4})}),
      K("gelu", "Gelu", {P({3, 4})}),
      K("gelu_tanh", "Gelu", {P({3, 4})}, {{"approximate", S("tanh")}}),
      K("clip", "Clip", {P({4, 5}, G::kDistinct), Scalar(-0.51f), Scalar(0.49f)}),
      K("clip_min_only", "Clip", {P({4, 5}, G::kDistinct), Scalar(-0.31f)}),
      K("softmax", "Softmax", {P({3, 5})}),
      K("softmax_axis1", "Softmax", {P({2, 4, 3})}, {{"axis", I(1)}}),
      K("log_softmax", "LogSoftmax", {P({3, 5})}),
      K("log_softmax_axis0", "LogSoftmax", {P({4, 3})}, {{"axis", I(0)}}),
      with(K("dropout", "Dropout", {P({4, 8}), Scalar(0.3f)}),
           [](GradCase& c) { c.training = true; }),
  };
}

inline std::vector<GradCase> linalg_cases() {
  std::vector<GradCase> v;
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1}) {
      ir::Shape a = ta ? ir::Shape{4, 3} : ir::Shape{3, 4};
      ir::Shape b = tb ? ir::Shape{5, 4} : ir::Shape{4, 5};
      v.push_back(K("gemm_t" + std::to_string(ta) + std::to_string(tb), "Gemm",
                    {P(a), P(b), P({5})},
                    {{"transA", I(ta)}, {"transB", I(tb)}, {"alpha", F(0.5f)}, {"beta", F(2.0f)}}));
    }
  v.push_back(K("gemm_c_row", "Gemm", {P({3, 4}), P({4, 5}), P({1, 5})}));
  v.push_back(K("gemm_no_c", "Gemm", {P({3, 4}), P({4, 5})}));
  v.push_back(K("matmul", "MatMul", {P({3, 4}), P({4, 5})}));
  v.push_back(K("matmul_batch_2d", "MatMul", {P({2, 3, 4}), P({4, 5})}));
  v.push_back(K("matmul_batch", "MatMul", {P({2, 3, 4}), P({2, 4, 5})}));
  v.push_back(K("matmul_bcast", "MatMul", {P({2, 1, 3, 4}), P({3, 4, 2})}));
  v.push_back(K("matmul_vec_mat", "MatMul", {P({4}), P({4, 5})}));
  v.push_back(K("matmul_mat_vec", "MatMul", {P({2, 3, 4}), P({4})}));
  v.push_back(K("matmul_vec_vec", "MatMul", {P({4}), P({4})}));
  // transA / transB (the gradient pass's own MatMuls): batched, broadcast, and
  // the linear-layer fold with a transposed weight.
  v.push_back(K("matmul_tA", "MatMul", {P({2, 4, 3}), P({2, 4, 5})}, {{"transA", I(1)}}));
  v.push_back(K("matmul_tB", "MatMul", {P({2, 3, 4}), P({2, 5, 4})}, {{"transB", I(1)}}));
  v.push_back(K("matmul_tAB_bcast", "MatMul", {P({2, 1, 4, 3}), P({3, 5, 4})},
                {{"transA", I(1)}, {"transB", I(1)}}));
  v.push_back(K("matmul_tB_weight", "MatMul", {P({2, 3, 4}), P({5, 4})}, {{"transB", I(1)}}));
  // The fused attention (ir/passes/fusion.h: fuse_attention): batched, a
  // shared and a per-batch additive mask, dropout regenerated backward.
  auto mask = [](ir::Shape shape) {
    ir::Tensor t(ir::DType::kF32, std::move(shape));
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = i % 3 == 1 ? -2.5f : 0.25f * static_cast<float>(i % 4);
    return C(t);
  };
  v.push_back(K("attention", "Attention", {P({2, 3, 4}), P({2, 4, 5}), P({2, 5, 3})},
                {{"scale", F(0.5f)}}));
  v.push_back(K("attention_mask", "Attention",
                {P({2, 3, 4}), P({2, 4, 5}), P({2, 5, 2}), mask({3, 5})}, {{"scale", F(0.7f)}}));
  v.push_back(K("attention_mask_4d", "Attention",
                {P({2, 2, 3, 4}), P({2, 2, 4, 3}), P({2, 2, 3, 2}), mask({2, 2, 3, 3})}));
  v.push_back(with(K("attention_dropout", "Attention", {P({2, 3, 4}), P({2, 4, 6}), P({2, 6, 3})},
                     {{"scale", F(0.5f)}, {"dropout", F(0.3f)}, {"seed", I(11)}}),
                   [](GradCase& c) { c.training = true; }));
  v.push_back(K("matmul_tA_matrix", "MatMul", {P({4, 3}), P({4, 5})}, {{"transA", I(1)}}));
  return v;
}

inline std::vector<GradCase> conv_pool_cases() {
  return {
      K("conv2d", "Conv", {P({2, 3, 5, 5}), P({4, 3, 3, 3}), P({4})}),
      K("conv2d_stride_pad", "Conv", {P({1, 2, 6, 6}), P({3, 2, 3, 3}), P({3})},
        {{"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}}),
      // 2x2 output positions: the batched-GEMM ConvGrad (conv_small_output.cc)
      K("conv2d_small_output", "Conv", {P({2, 3, 4, 4}), P({4, 3, 3, 3}), P({4})},
        {{"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}}),
      K("conv2d_dilation", "Conv", {P({1, 2, 7, 7}), P({2, 2, 3, 3})}, {{"dilations", Is({2, 2})}}),
      K("conv2d_groups", "Conv", {P({1, 4, 5, 5}), P({6, 2, 3, 3}), P({6})}, {{"group", I(2)}}),
      K("conv2d_depthwise", "Conv", {P({2, 3, 5, 5}), P({3, 1, 3, 3})},
        {{"group", I(3)}, {"pads", Is({1, 1, 1, 1})}}),
      K("conv2d_same_upper", "Conv", {P({1, 2, 5, 5}), P({2, 2, 2, 2})},
        {{"auto_pad", S("SAME_UPPER")}, {"strides", Is({2, 2})}}),
      K("conv1d", "Conv", {P({2, 3, 9}), P({4, 3, 3}), P({4})}, {{"strides", Is({2})}}),
      K("conv3d", "Conv", {P({1, 2, 4, 4, 4}), P({2, 2, 2, 2, 2}), P({2})}),
      K("conv_transpose", "ConvTranspose", {P({1, 3, 4, 4}), P({3, 2, 3, 3}), P({2})}),
      K("conv_transpose_stride", "ConvTranspose", {P({2, 2, 3, 3}), P({2, 3, 3, 3})},
        {{"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}, {"output_padding", Is({1, 1})}}),
      K("conv_transpose_groups", "ConvTranspose", {P({1, 4, 3, 3}), P({4, 1, 2, 2}), P({2})},
        {{"group", I(2)}}),
      K("conv_transpose_1d", "ConvTranspose", {P({2, 2, 5}), P({2, 3, 3})}, {{"strides", Is({2})}}),
      K("maxpool", "MaxPool", {P({2, 2, 6, 6}, G::kDistinct)},
        {{"kernel_shape", Is({2, 2})}, {"strides", Is({2, 2})}}),
      K("maxpool_overlap_pad", "MaxPool", {P({1, 2, 7, 7}, G::kDistinct)},
        {{"kernel_shape", Is({3, 3})}, {"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}}),
      K("maxpool_ceil", "MaxPool", {P({1, 1, 7, 7}, G::kDistinct)},
        {{"kernel_shape", Is({2, 2})}, {"strides", Is({2, 2})}, {"ceil_mode", I(1)}}),
      K("maxpool_1d", "MaxPool", {P({2, 3, 9}, G::kDistinct)},
        {{"kernel_shape", Is({3})}, {"strides", Is({2})}}),
      K("maxpool_odd_halving", "MaxPool", {P({1, 2, 5, 7}, G::kDistinct)},
        {{"kernel_shape", Is({2, 2})}, {"strides", Is({2, 2})}}),
      K("maxpool_1d_halving", "MaxPool", {P({2, 3, 9}, G::kDistinct)},
        {{"kernel_shape", Is({2})}, {"strides", Is({2})}}),
      K("avgpool", "AveragePool", {P({2, 2, 6, 6})},
        {{"kernel_shape", Is({2, 2})}, {"strides", Is({2, 2})}}),
      K("avgpool_pad_excl", "AveragePool", {P({1, 2, 5, 5})},
        {{"kernel_shape", Is({3, 3})}, {"strides", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})}}),
      K("avgpool_pad_incl", "AveragePool", {P({1, 2, 5, 5})},
        {{"kernel_shape", Is({3, 3})}, {"pads", Is({1, 1, 1, 1})}, {"count_include_pad", I(1)}}),
      K("global_avgpool", "GlobalAveragePool", {P({2, 3, 4, 5})}),
  };
}

inline std::vector<GradCase> norm_loss_cases() {
  return {
      K("batchnorm_train", "BatchNormalization",
        {P({4, 3, 2, 2}), P({3}, G::kPositive), P({3}), C(ir::Tensor(ir::DType::kF32, {3})),
         C(ir::Tensor::from_f32({1, 1, 1}, {3}))},
        {{"training_mode", I(1)}, {"epsilon", F(1e-3f)}}),
      K("batchnorm_train_2d", "BatchNormalization",
        {P({6, 4}), P({4}, G::kPositive), P({4}), C(ir::Tensor(ir::DType::kF32, {4})),
         C(ir::Tensor::from_f32({1, 1, 1, 1}, {4}))},
        {{"training_mode", I(1)}}),
      K("batchnorm_eval", "BatchNormalization",
        {P({2, 3, 2, 2}), P({3}), P({3}), C(ir::Tensor::from_f32({0.1f, -0.2f, 0.3f}, {3})),
         C(ir::Tensor::from_f32({0.5f, 1.5f, 2.0f}, {3}))}),
      K("layernorm", "LayerNormalization", {P({3, 8}), P({8}), P({8})}),
      K("layernorm_axis", "LayerNormalization", {P({2, 3, 4}), P({3, 4})}, {{"axis", I(-2)}}),
      K("sce_mean", "SoftmaxCrossEntropyLoss", {P({4, 5}), IntsShaped({1, 0, 4, 2}, {4})}),
      K("sce_sum_weights", "SoftmaxCrossEntropyLoss",
        {P({4, 5}), IntsShaped({1, 0, 4, 2}, {4}),
         C(ir::Tensor::from_f32({1, 2, 0.5f, 1, 3}, {5}))},
        {{"reduction", S("sum")}}),
      K("sce_none_ignore", "SoftmaxCrossEntropyLoss",
        {P({3, 4, 2}), IntsShaped({1, 0, 3, 3, 2, 1}, {3, 2})},
        {{"reduction", S("none")}, {"ignore_index", I(3)}}),
      K("sce_mean_weights_ignore", "SoftmaxCrossEntropyLoss",
        {P({4, 3}), IntsShaped({1, 0, 2, 1}, {4}), C(ir::Tensor::from_f32({1, 2, 0.5f}, {3}))},
        {{"ignore_index", I(0)}}),
      K("nll_mean", "NegativeLogLikelihoodLoss", {P({4, 5}), IntsShaped({1, 0, 4, 2}, {4})}),
      K("nll_weights", "NegativeLogLikelihoodLoss",
        {P({3, 4, 2}), IntsShaped({1, 0, 3, 3, 2, 1}, {3, 2}),
         C(ir::Tensor::from_f32({1, 2, 0.5f, 1}, {4}))}),
  };
}

inline std::vector<GradCase> shape_index_cases() {
  return {
      K("reshape", "Reshape", {P({2, 3, 4}), Ints({4, -1})}),
      K("trilu_lower_k", "Trilu", {P({2, 3, 4}), IntsShaped({1}, {})}, {{"upper", I(0)}}),
      K("trilu_upper", "Trilu", {P({4, 3})}),
      K("tile", "Tile", {P({2, 3}), Ints({2, 3})}),
      K("resize_linear_scales", "Resize",
        {P({1, 2, 3, 4}), None(), C(ir::Tensor::from_f32({1, 1, 1.5f, 2}, {4}))},
        {{"mode", S("linear")}}),
      K("resize_cubic_align_corners", "Resize",
        {P({1, 1, 4, 3}), None(), None(), Ints({1, 1, 3, 5})},
        {{"mode", S("cubic")}, {"coordinate_transformation_mode", S("align_corners")}}),
      K("resize_linear_antialias_down", "Resize",
        {P({1, 1, 7, 9}), None(), None(), Ints({1, 1, 3, 4})},
        {{"mode", S("linear")}, {"antialias", I(1)}}),
      K("resize_cubic_antialias_exclude", "Resize",
        {P({1, 1, 8, 5}), None(), None(), Ints({1, 1, 3, 5})},
        {{"mode", S("cubic")}, {"antialias", I(1)}, {"exclude_outside", I(1)}}),
      K("resize_nearest_down", "Resize",
        {P({1, 1, 5, 6}), None(), C(ir::Tensor::from_f32({1, 1, 0.6f, 0.5f}, {4}))}),
      K("resize_crop_extrapolate", "Resize",
        {P({1, 1, 4, 4}), C(ir::Tensor::from_f32({0, 0, 0.2f, -0.1f, 1, 1, 0.8f, 1.2f}, {8})),
         None(), Ints({1, 1, 3, 3})},
        {{"mode", S("linear")},
         {"coordinate_transformation_mode", S("tf_crop_and_resize")},
         {"extrapolation_value", F(0.5f)}}),
      // Grids inside and beyond [-1, 1]: every padding's in-range and edge paths.
      K("grid_sample_bilinear_zeros", "GridSample", {P({1, 2, 3, 4}), P({1, 2, 3, 2}, G::kGrid)}),
      K("grid_sample_bilinear_border_align", "GridSample",
        {P({2, 1, 3, 3}), P({2, 2, 2, 2}, G::kGrid)},
        {{"padding_mode", S("border")}, {"align_corners", I(1)}}),
      K("grid_sample_bilinear_reflection", "GridSample",
        {P({1, 2, 4, 3}), P({1, 3, 2, 2}, G::kGrid)}, {{"padding_mode", S("reflection")}}),
      K("grid_sample_bicubic_reflection_align", "GridSample",
        {P({1, 1, 4, 4}), P({1, 2, 2, 2}, G::kGrid)},
        {{"mode", S("bicubic")}, {"padding_mode", S("reflection")}, {"align_corners", I(1)}}),
      K("grid_sample_bicubic_zeros", "GridSample", {P({1, 2, 4, 5}), P({1, 2, 3, 2}, G::kGrid)},
        {{"mode", S("bicubic")}}),
      K("grid_sample_nearest", "GridSample", {P({1, 2, 3, 3}), P({1, 2, 2, 2}, G::kGrid)},
        {{"mode", S("nearest")}}),
      // Rois inside, across the border and past the feature map; fixed and adaptive sampling.
      K("roi_align_avg", "RoiAlign",
        {P({2, 2, 5, 6}),
         C(ir::Tensor::from_f32(
             {0.5f, 0.7f, 3.9f, 4.1f, -1.2f, 1.3f, 2.6f, 5.8f, 2.2f, 0.1f, 6.9f, 3.3f}, {3, 4})),
         IntsShaped({1, 0, 1}, {3})},
        {{"output_height", I(2)}, {"output_width", I(3)}, {"sampling_ratio", I(2)}}),
      K("roi_align_adaptive_legacy", "RoiAlign",
        {P({1, 1, 6, 6}), C(ir::Tensor::from_f32({0.3f, 0.4f, 5.1f, 4.7f}, {1, 4})),
         IntsShaped({0}, {1})},
        {{"output_height", I(2)},
         {"output_width", I(2)},
         {"spatial_scale", F(0.9f)},
         {"coordinate_transformation_mode", S("output_half_pixel")}}),
      with(K("top_k", "TopK", {P({3, 5}, G::kDistinct), Ints({2})}, {{"axis", I(1)}}),
           [](GradCase& c) { c.outputs = 2; }),
      with(K("top_k_smallest_axis0", "TopK", {P({4, 3}, G::kDistinct), Ints({3})},
             {{"axis", I(0)}, {"largest", I(0)}}),
           [](GradCase& c) { c.outputs = 2; }),
      K("gather_elements_repeats", "GatherElements",
        {P({3, 4}), IntsShaped({2, 0, 2, 1, -1, 0, 0, 2}, {2, 4})}, {{"axis", I(0)}}),
      K("scatter_elements_none", "ScatterElements",
        {P({3, 4}), IntsShaped({3, 0, 1, -2}, {2, 2}), P({2, 2})}, {{"axis", I(1)}}),
      K("scatter_elements_add_repeats", "ScatterElements",
        {P({3, 4}), IntsShaped({1, 1, 0, 2, 1, 0}, {2, 3}), P({2, 3})},
        {{"axis", I(0)}, {"reduction", S("add")}}),
      // Rows 1 and (-2 =) 1 repeat: GatherND's gradient adds both.
      K("gather_nd_rows", "GatherND", {P({3, 4}), IntsShaped({1, -2, 0}, {3, 1})}),
      K("gather_nd_elements", "GatherND",
        {P({2, 3, 2}), IntsShaped({1, 2, 0, 1, 0, 1}, {2, 1, 3})}),
      K("scatter_nd_none", "ScatterND", {P({4, 3}), IntsShaped({2, 0}, {2, 1}), P({2, 3})}),
      K("scatter_nd_add_repeats", "ScatterND",
        {P({3, 2, 2}), IntsShaped({1, 0, 1, 0, 2, 1}, {3, 2}), P({3, 2})},
        {{"reduction", S("add")}}),
      K("cumsum_exclusive_reverse", "CumSum", {P({2, 3, 4}), IntsShaped({1}, {})},
        {{"exclusive", I(1)}, {"reverse", I(1)}}),
      K("cumsum", "CumSum", {P({2, 5}), IntsShaped({-1}, {})}),
      K("flatten", "Flatten", {P({2, 3, 4})}, {{"axis", I(2)}}),
      K("squeeze", "Squeeze", {P({2, 1, 3}), Ints({1})}),
      K("unsqueeze", "Unsqueeze", {P({2, 3}), Ints({0, 3})}),
      K("transpose", "Transpose", {P({2, 3, 4})}, {{"perm", Is({1, 2, 0})}}),
      K("transpose_default", "Transpose", {P({2, 3, 4})}),
      K("expand", "Expand", {P({3, 1}), Ints({2, 3, 4})}),
      K("identity", "Identity", {P({5})}),
      K("concat", "Concat", {P({2, 3}), C(ir::Tensor::from_f32({1, 2}, {2, 1})), P({2, 2})},
        {{"axis", I(1)}}),
      with(K("split", "Split", {P({2, 7}), Ints({2, 3, 2})}, {{"axis", I(1)}}),
           [](GradCase& c) {
             c.outputs = 3;
             c.loss_outputs = {0, 2};
           }),
      K("slice", "Slice", {P({4, 6}), Ints({1, 0}), Ints({3, 6}), Ints({0, 1}), Ints({1, 2})}),
      K("slice_negative_step", "Slice", {P({5, 3}), Ints({-1}), Ints({0}), Ints({0}), Ints({-2})}),
      K("gather_embedding", "Gather", {P({6, 4}), IntsShaped({1, 5, 1, -1, 0, 2}, {2, 3})}),
      K("gather_axis1", "Gather", {P({3, 5}), IntsShaped({4, 0, 4}, {3})}, {{"axis", I(1)}}),
      K("pad", "Pad", {P({2, 3}), Ints({1, 0, 2, 1}), Scalar(0.5f)}),
      // Pads wider than the axis reflect and wrap more than once; a negative pad crops.
      K("pad_reflect", "Pad", {P({2, 3, 4}), Ints({0, 1, 2, 0, 2, -1})}, {{"mode", S("reflect")}}),
      K("pad_edge", "Pad", {P({3, 4}), Ints({2, 0, 1, 3})}, {{"mode", S("edge")}}),
      K("pad_wrap", "Pad", {P({2, 3}), Ints({1, 4, 0, 2})}, {{"mode", S("wrap")}}),
      K("reduce_sum", "ReduceSum", {P({2, 3, 4}), Ints({1})}, {{"keepdims", I(0)}}),
      K("reduce_sum_all", "ReduceSum", {P({2, 3})}),
      K("reduce_mean", "ReduceMean", {P({2, 3, 4})}, {{"axes", Is({0, 2})}}),
      K("reduce_max", "ReduceMax", {P({3, 4}, G::kDistinct)}, {{"axes", Is({1})}}),
      K("reduce_min", "ReduceMin", {P({3, 4}, G::kDistinct)}, {{"axes", Is({1})}}),
      K("reduce_prod", "ReduceProd", {P({2, 3, 4}, G::kAwayFromZero)}, {{"axes", Is({1})}}),
      K("reduce_l1", "ReduceL1", {P({2, 3, 4}, G::kAwayFromZero)}, {{"axes", Is({0, 2})}}),
      K("reduce_l2", "ReduceL2", {P({2, 3, 4})}, {{"axes", Is({2})}, {"keepdims", I(0)}}),
      K("reduce_sum_square", "ReduceSumSquare", {P({2, 3, 4})}, {{"axes", Is({1})}}),
      K("reduce_log_sum", "ReduceLogSum", {P({2, 3, 4}, G::kPositive)}, {{"axes", Is({1})}}),
      K("reduce_log_sum_exp", "ReduceLogSumExp", {P({2, 3, 4})}, {{"axes", Is({0, 2})}}),
  };
}

inline std::vector<GradCase> rnn_cases() {
  auto lstm = [](std::string name, std::string dir, int64_t dirs, bool states) {
    // X (T=3, B=2, I=3), hidden 4
    std::vector<Arg> args = {P({3, 2, 3}), P({dirs, 16, 3}), P({dirs, 16, 4}), P({dirs, 32}),
                             None()};
    if (states) {
      args.push_back(P({dirs, 2, 4}));
      args.push_back(P({dirs, 2, 4}));
    }
    GradCase c =
        K(std::move(name), "LSTM", args, {{"hidden_size", I(4)}, {"direction", S(std::move(dir))}});
    c.outputs = 3;
    c.loss_outputs = {0, 1, 2};
    return c;
  };
  return {lstm("lstm", "forward", 1, true), lstm("lstm_reverse", "reverse", 1, false),
          lstm("lstm_bidirectional", "bidirectional", 2, true)};
}

inline std::vector<GradCase> all_cases() {
  std::vector<GradCase> all;
  for (auto f : {elementwise_cases, activation_cases, linalg_cases, conv_pool_cases,
                 norm_loss_cases, shape_index_cases, rnn_cases})
    for (auto& c : f()) all.push_back(std::move(c));
  return all;
}

}  // namespace grad_cases

using grad_cases::all_cases;

}  // namespace pipetrain::test
