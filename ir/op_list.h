// The one list of ops pipetrain supports. Adding an op means: an entry here,
// its schema (ir/ops/<family>.cc: attributes and shape rule), its CPU kernel
// (executor/cpu/kernels/<family>.cc) and a case in the op test table. The
// linker refuses a build where any of those is missing.
#pragma once

// clang-format off
#define PIPETRAIN_OPS(X)                                                                   \
  /* elementwise binary (numpy broadcasting) */                                           \
  X(Add) X(Sub) X(Mul) X(Div) X(Pow) X(Equal) X(Less) X(Greater) X(Max) X(Min)            \
  X(Mod) X(And) X(Or) X(Xor) X(Sum) X(Mean) X(PRelu) X(GreaterOrEqual) X(LessOrEqual)     \
  /* elementwise unary */                                                                 \
  X(Sqrt) X(Neg) X(Exp) X(Log) X(Reciprocal) X(Abs) X(Erf) X(Not)                         \
  X(IsNaN) X(IsInf) X(Tan) X(Asin) X(Acos) X(Atan) X(Sinh) X(Cosh) X(Asinh) X(Acosh)      \
  X(Atanh) X(Shrink)                                                                      \
  /* activations */                                                                       \
  X(Relu) X(LeakyRelu) X(Sigmoid) X(Tanh) X(Gelu) X(Clip) X(Softmax) X(LogSoftmax)        \
  X(HardSigmoid) X(HardSwish) X(Elu) X(Selu) X(Celu) X(ThresholdedRelu) X(Softplus)        \
  X(Softsign) X(Mish) X(Sin) X(Cos) X(Floor) X(Ceil) X(Round) X(Sign)                     \
  /* linear algebra */                                                                    \
  X(Gemm) X(MatMul)                                                                       \
  /* fused by ir/passes (internal): softmax(scale Q K^T + mask) V */                       \
  X(Attention)                                                                            \
  /* convolution and pooling */                                                           \
  X(Conv) X(ConvTranspose) X(MaxPool) X(AveragePool) X(GlobalAveragePool) X(RoiAlign)      \
  /* resampling */                                                                        \
  X(Resize) X(GridSample)                                                                 \
  /* normalisation and regularisation */                                                  \
  X(BatchNormalization) X(LayerNormalization) X(Dropout)                                  \
  /* shape and data movement */                                                           \
  X(Flatten) X(Reshape) X(Transpose) X(Concat) X(Split) X(Slice) X(Gather) X(Squeeze)     \
  X(Unsqueeze) X(Expand) X(Pad) X(Identity) X(Cast) X(CastLike) X(Where) X(Shape)        \
  X(Constant)                                                                             \
  X(ConstantOfShape) X(Range) X(Size) X(Trilu) X(Tile) X(GatherElements)                  \
  X(ScatterElements) X(EyeLike) X(OneHot) X(GatherND) X(ScatterND)                        \
  /* reductions */                                                                        \
  X(ReduceMean) X(ReduceSum) X(ReduceMax) X(ReduceMin) X(ReduceProd) X(ReduceL1)         \
  X(ReduceL2) X(ReduceSumSquare) X(ReduceLogSum) X(ReduceLogSumExp)                       \
  /* scans along an axis */                                                               \
  X(ArgMax) X(ArgMin) X(CumSum) X(Hardmax) X(TopK)                                        \
  /* recurrent */                                                                         \
  X(LSTM)                                                                                 \
  /* losses */                                                                            \
  X(SoftmaxCrossEntropyLoss) X(NegativeLogLikelihoodLoss)                                 \
  /* gradient ops: emitted by autodiff only (OpSchema::internal), never imported */       \
  X(ReluGrad) X(LeakyReluGrad) X(SigmoidGrad) X(TanhGrad) X(GeluGrad) X(ClipGrad)          \
  X(DropoutGrad) X(SoftmaxGrad) X(LogSoftmaxGrad) X(HardSigmoidGrad) X(HardSwishGrad)     \
  X(ConvGrad) X(ConvTransposeGrad) X(MaxPoolGrad) X(AveragePoolGrad)                      \
  X(BatchNormalizationGrad) X(LayerNormalizationGrad)                                     \
  X(SoftmaxCrossEntropyLossGrad) X(NegativeLogLikelihoodLossGrad)                         \
  X(GatherGrad) X(SliceGrad) X(LSTMGrad) X(ResizeGrad) X(GridSampleGrad)                   \
  X(RoiAlignGrad) X(AttentionGrad)
// clang-format on
