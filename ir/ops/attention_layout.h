// Where the fused Attention's operands live in the tensors it is given
// (ir/ops/attention.cc's layout attributes): matrices of a batch, each row a
// contiguous run, found through strides. The schema checks a layout with
// these, the fusion pass asks whether one can be absorbed, and the kernels
// (executor/device/ops_attention.h) gather and scatter through them.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/tensor.h"

namespace pipetrain::ir {

/// Matrix b (row-major over `dims`, the batch axes) starts at `offset` +
/// sum of its batch indices times `strides`; its rows are `row` apart and
/// its columns contiguous.
struct OperandView {
  std::vector<int64_t> dims, strides;
  int64_t row = 0, offset = 0;
};

/// A contiguous tensor `stored` read as Transpose(stored, perm) (perm empty:
/// as stored), rank r: batch axes 0..r-3, rows along read axis `rows`, the
/// columns the stored last axis (the caller checks perm keeps it there).
OperandView operand_view(const Shape& stored, const std::vector<int64_t>& perm, size_t rows);

/// `v`, a view of a contiguous tensor X whose rows are `cols` long, moved
/// into the tensor P of rows `width` long where X is the column block
/// [first, first + cols) of P's rows (P[..., first:first+cols] reshaped to
/// X). A batch axis that runs across X's rows is split in two (heads of a
/// packed projection); nothing when a matrix row or column would cross them.
std::optional<OperandView> into_columns(const OperandView& v, int64_t width, int64_t first,
                                        int64_t cols, int64_t rows_per_matrix,
                                        int64_t cols_per_matrix);

/// The permutation that undoes `perm`.
std::vector<int64_t> inverse_perm(const std::vector<int64_t>& perm);

}  // namespace pipetrain::ir
