// The CPU kernels' side of the blocked-layout plan (executor/layout_plan.h).
// The blocked layout of a 4-D (N, C, H, W) activation is oneDNN's channel
// blocking with block B: element (n, c, h, w) sits at
//   (((n * C / B + c / B) * H + h) * W + w) * B + c % B,
// B chosen once per process as the block oneDNN's convolutions compute in
// on this CPU (8 on AVX2: nChw8c; on AVX-512 its brgemm kernels take nhwc,
// which is B = C). A tensor whose channels B does not divide stays plain.
#pragma once

#include <cstdint>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "executor/backend.h"
#include "ir/graph.h"
#include "ir/shape.h"

namespace pipetrain::exec::cpu {

/// The channel block of a tensor with `channels` channels in this process's
/// blocked layout; 0 when it cannot be stored blocked (or oneDNN computes
/// its convolutions in no layout of this family).
int64_t channel_block(int64_t channels);

/// A 4-D f32 tensor whose channels channel_block() divides.
bool blockable(const ir::TensorDesc& t);

/// Conv and GlobalAveragePool take either layout in and out; MaxPool (without
/// Indices) and the elementwise activations and arithmetic keep their
/// input's; BatchNormalization reads X and writes Y in either, and its
/// gradient reads dY and X and writes dX so. Where oneDNN's backward computes in the same channel blocks,
/// ConvGrad also reads dY and X and writes dX in either, and ReluGrad and
/// MaxPoolGrad keep their inputs'. Everything else is plain only. 4-D float tensors only (which
/// of them are blockable() is the plan's to check).
LayoutAccess blocked_layout_access(const ir::Graph& g, const ir::Node& n);

/// oneDNN's descriptor of a blocked (N, C, H, W) f32 tensor.
dnnl::memory::desc blocked_desc(const ir::Shape& nchw);

/// dst blocked from row-major src of shape `nchw`, and back.
void to_blocked(const float* src, float* dst, const ir::Shape& nchw);
void from_blocked(const float* src, float* dst, const ir::Shape& nchw);

/// `data` itself when row-major; when blocked, a row-major copy of it made in
/// `copy` (for kernel paths that compute row-major only).
const float* row_major_data(const float* data, const ir::Shape& nchw, bool blocked,
                            std::vector<float>* copy);

}  // namespace pipetrain::exec::cpu
