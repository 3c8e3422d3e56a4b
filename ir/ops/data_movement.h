// Index arithmetic and attribute decoding shared by the shape rules of the
// data-movement ops (ir/ops/shape_ops.cc, ir/ops/index_ops.cc) and their CPU
// kernels, so both sides agree on every clamp and default.
//
// Functions here throw ModelError / UnsupportedOp with a message that does not
// name the node; shape rules add the node prefix (see with_node below).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/error.h"
#include "ir/node.h"
#include "ir/op_registry.h"
#include "ir/shape.h"
#include "ir/tensor.h"

namespace pipetrain::ir {

/// Runs f(); a ModelError / UnsupportedOp it throws is rethrown through ctx so
/// the message starts with the node ("Slice node 'x': ...").
template <typename F>
auto with_node(const InferContext& ctx, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const UnsupportedOp& e) {
    ctx.unsupported(e.what());
  } catch (const ModelError& e) {
    ctx.fail(e.what());
  }
}

/// A Slice resolved over the full rank: output element k along axis a reads
/// input element start[a] + k * step[a] (axes not sliced: start 0, step 1).
struct SliceSpec {
  Shape out;
  std::vector<int64_t> start;  // (rank)
  std::vector<int64_t> step;   // (rank)
};

/// Resolves ONNX Slice (opset 10+) against input shape `in`. `axes` and `steps`
/// may be empty (defaults: 0..n-1 and 1). Clamping follows the ONNX spec:
/// start += dim if negative, then clamp to [0, dim] (step > 0) or [0, dim-1]
/// (step < 0); end likewise to [0, dim] or [-1, dim-1];
/// count = max(0, ceil((end - start) / step)).
SliceSpec resolve_slice(const Shape& in, const std::vector<int64_t>& starts,
                        const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
                        const std::vector<int64_t>& steps);

enum class PadMode { kConstant, kReflect, kEdge, kWrap };
/// "constant" | "reflect" | "edge" | "wrap"; UnsupportedOp otherwise.
PadMode pad_mode_from_string(const std::string& mode);

/// Full-rank pads: out[a] = in[a] + begin[a] + end[a]; negative pads crop.
struct PadSpec {
  Shape out;
  std::vector<int64_t> begin;  // (rank)
  std::vector<int64_t> end;    // (rank)
};

/// Resolves ONNX Pad's `pads` ([x1_begin, x2_begin, ..., x1_end, x2_end, ...],
/// over `axes` when given (opset 18), else over all axes).
PadSpec resolve_pads(const Shape& in, const std::vector<int64_t>& pads,
                     const std::vector<int64_t>& axes, PadMode mode);

/// Source index along an axis of size n for padded coordinate p (p = output
/// index - begin pad), or -1 where the constant value goes. Reflect mirrors
/// without repeating the edge (period 2(n-1)), edge clamps, wrap is p mod n;
/// all three match numpy.pad for pads larger than the axis.
int64_t pad_source_index(int64_t p, int64_t n, PadMode mode);

/// Shape op (opset 15) start/end attributes resolved against rank r: negative
/// values count from the end, both clamp to [0, r]; the output is dims
/// [first, second) (empty when second <= first).
std::pair<int64_t, int64_t> shape_op_range(int64_t rank, int64_t start, int64_t end);

/// The tensor a Constant node produces, from exactly one of its attributes
/// value | value_float | value_floats | value_int | value_ints.
Tensor constant_node_value(const Node& n);

/// ConstantOfShape's fill value: its `value` attribute (one element) or f32 0.
Tensor constant_of_shape_value(const Node& n);

}  // namespace pipetrain::ir
