// Graph passes that rewrite what exporters emit into fewer, larger ops
// before the backward pass is built, so the forward and the gradients both
// run fewer kernels over less memory. Each rewrite keeps the graph's outputs
// and every tensor a kept node reads (names included), and computes the same
// function up to float rounding. The importer runs them unless told not to
// (`--no-fuse`).
#pragma once

#include "ir/graph.h"

namespace pipetrain::ir::passes {

struct FusionCounts {
  int gelu = 0;            // Div/Erf/Add/Mul/Mul chains -> Gelu
  int weight_gemm = 0;     // MatMul on a transposed weight and/or + bias -> Gemm
  int idle_dropout = 0;    // Dropout that drops nothing: removed
  int conv_relu = 0;       // Conv -> Relu as one Conv (activation "Relu")
  int conv_batchnorm = 0;  // inference only: Conv -> BatchNormalization folded into the Conv
  int conv_add = 0;        // Conv -> Add (-> Relu) as one Conv with a residual input
  int attention = 0;       // MatMul, scale, mask, Softmax, Dropout, MatMul -> Attention
  int batchnorm_relu = 0;  // BatchNormalization -> Relu as one (activation "Relu")
  int batchnorm_add = 0;   // BatchNormalization -> Add (-> Relu) with a residual input
  int gemm_relu = 0;       // inference only: Gemm -> Relu as one Gemm (activation "Relu")
};

/// x * 0.5 * (1 + erf(x / sqrt 2)) (PyTorch's export of exact GELU, either
/// order of the two products, x / sqrt 2 as a Div or a Mul) -> Gelu(x). Its
/// gradient is then one GeluGrad instead of a dozen elementwise nodes.
int fuse_gelu(Graph& g);

/// MatMul(A, Transpose(W)) with W a 2-D value (a linear layer's weight as
/// PyTorch exports it), and MatMul(A, W) followed by Add of a bias value of
/// shape (N) -> Gemm(A', W, bias, transB) with A reshaped to rows (views): no
/// transpose of the weight forward, none of its gradient backward, and the
/// bias added in the GEMM's epilogue.
int fuse_weight_gemm(Graph& g);

/// Dropout whose ratio is a constant 0, or whose training_mode is a constant
/// false, with its mask unused: dropped, its readers read its input (an
/// Identity where its output is a graph output).
int drop_idle_dropout(Graph& g);

/// Conv whose output only a Relu reads -> that Conv with the attribute
/// activation = "Relu" writing the Relu's output (oneDNN applies it as a
/// post-op, before the result leaves the cache). Its gradient is the pair's:
/// ReluGrad from Y, then ConvGrad (autodiff/rules/conv_pool.cc).
int fuse_conv_relu(Graph& g);

/// Conv whose output only an Add reads, the Add's other operand a tensor of
/// the same shape (a residual connection), and the Relu that alone reads the
/// sum if there is one -> that Conv with the residual as its input 3 (and
/// activation = "Relu") writing the last node's output: oneDNN adds it as a
/// sum post-op while the output block is in the cache, where the Add and the
/// Relu each read and wrote the whole tensor again. Backward, the residual's
/// gradient is the sum's (after the ReLU's), as the Add's was.
int fuse_conv_add(Graph& g);

/// fuse_conv_relu and fuse_conv_add for a BatchNormalization (training or
/// inference mode; its residual is input 5): ResNet's BatchNorm -> Relu and
/// BatchNorm -> Add -> Relu, where training keeps the BatchNorm apart from
/// the Conv before it. Its kernels add and clip each block of Y while it is
/// in the cache; backward, ReluGrad from Y, then BatchNormalizationGrad.
int fuse_batchnorm_relu(Graph& g);
int fuse_batchnorm_add(Graph& g);

/// Gemm whose output only a Relu reads -> that Gemm with activation "Relu"
/// (an MLP's hidden layers, a CNN's classifier): the ReLU runs right after
/// the product, while its last rows are in the cache, and the pre-activation
/// is never a tensor of its own. Its gradient would be ReluGrad from Y, then
/// the Gemm's, but fuse() applies it to forward-only graphs alone: training
/// keeps the ReLU a layer of its own (an MLP's stages are cut from them).
int fuse_gemm_relu(Graph& g);

/// Conv with value weights (and bias) whose output only an inference-mode
/// BatchNormalization with value statistics reads -> one Conv with weights
/// W' = W a and bias b' = (b - mean) a + B per output channel, a = scale /
/// sqrt(var + epsilon) (computed in double, stored as new constants): the
/// normalisation costs nothing at run time. For graphs that only run forward
/// (a trained BatchNorm's statistics are fixed there).
int fold_conv_batchnorm(Graph& g);

/// softmax(MatMul(Q, Kt) * scale + mask) -> Dropout? -> MatMul(., V) over
/// the last two axes (a scale on Q before the product, as PyTorch's
/// MultiheadAttention exports it, or on the scores; the mask an additive
/// constant of shape (Lq, Lk) or the scores') -> one Attention node. Its
/// kernel keeps no (Lq, Lk) tensor for the backward, which recomputes the
/// probabilities (and the dropout mask, from its seed) block by block.
int fuse_attention(Graph& g);

/// The inverse of fuse_conv_add, fuse_conv_relu, fuse_batchnorm_add,
/// fuse_batchnorm_relu and fuse_gemm_relu: each Conv, BatchNormalization or
/// Gemm with pipetrain's
/// activation or residual input back to the node, the Add and the Relu, as
/// standard ONNX has them (for export; fusing the result again gives the
/// same nodes). Returns how many nodes it split.
int split_fused_epilogues(Graph& g);

/// All of the above, in an order where each sees the others' results:
/// fuse_conv_add before fuse_conv_relu (and the BatchNorm ones after them,
/// then with `inference` fuse_gemm_relu),
/// and with `inference` the
/// forward-only fold_conv_batchnorm before both, so Conv -> BatchNorm -> Relu
/// and Conv -> BatchNorm -> Add -> Relu each become one Conv.
FusionCounts fuse(Graph& g, bool inference = false);

}  // namespace pipetrain::ir::passes
