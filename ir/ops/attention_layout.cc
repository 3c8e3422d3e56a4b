#include "ir/ops/attention_layout.h"

namespace pipetrain::ir {

OperandView operand_view(const Shape& stored, const std::vector<int64_t>& perm, size_t rows) {
  const size_t r = stored.size();
  std::vector<int64_t> st(r, 1);
  for (size_t i = r - 1; i-- > 0;) st[i] = st[i + 1] * stored[i + 1];
  auto axis = [&](size_t i) { return perm.empty() ? i : static_cast<size_t>(perm[i]); };
  OperandView v;
  for (size_t i = 0; i + 2 < r; ++i) {
    v.dims.push_back(stored[axis(i)]);
    v.strides.push_back(st[axis(i)]);
  }
  v.row = st[axis(rows)];
  return v;
}

std::optional<OperandView> into_columns(const OperandView& v, int64_t width, int64_t first,
                                        int64_t cols, int64_t rows_per_matrix,
                                        int64_t cols_per_matrix) {
  if (cols <= 0 || first < 0 || first + cols > width) return std::nullopt;
  // X's offset f is f / cols rows and f % cols columns into the block: P's
  // (f / cols) width + f % cols + first. That is linear when each axis's
  // stride is a whole number of X's rows (a row term) or less than a row (a
  // column term), and the column terms together stay within one row.
  OperandView out;
  out.offset = first;
  int64_t reach = cols_per_matrix - 1;  // furthest column a matrix element reaches
  auto column_term = [&](int64_t n, int64_t s) {
    reach += (n - 1) * s;
    return s;
  };
  if (rows_per_matrix <= 1 || v.row % cols == 0)
    out.row = v.row / cols * width;
  else if (v.row < cols)
    out.row = column_term(rows_per_matrix, v.row);
  else
    return std::nullopt;
  for (size_t i = 0; i < v.dims.size(); ++i) {
    const int64_t n = v.dims[i], s = v.strides[i];
    if (n <= 1 || s % cols == 0) {
      out.dims.push_back(n);
      out.strides.push_back(n <= 1 ? 0 : s / cols * width);
    } else if (s < cols && cols % s == 0 && n * s > cols && n % (cols / s) == 0) {
      // Across X's rows: n = outer x inner, inner x s one row (the heads of
      // a packed projection that a Reshape merged with the batch).
      const int64_t inner = cols / s;
      out.dims.push_back(n / inner);
      out.strides.push_back(width);
      out.dims.push_back(inner);
      out.strides.push_back(column_term(inner, s));
    } else if (s < cols) {
      out.dims.push_back(n);
      out.strides.push_back(column_term(n, s));
    } else {
      return std::nullopt;
    }
  }
  if (reach >= cols) return std::nullopt;
  return out;
}

std::vector<int64_t> inverse_perm(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inv;
}

}  // namespace pipetrain::ir
