// MatMul's operands as numpy sees them: (batch..., M, K) x (batch..., K, N)
// with the batch dims broadcast (a 1-D operand gains and loses a unit dim).
// The gradient pass's MatMuls may read an operand transposed in its last two
// axes (transA: A stored (batch..., K, M); transB: B stored (batch..., N, K)).
// Shared by the CPU kernel and the cuBLAS one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "ir/shape.h"

namespace pipetrain::exec::device {

struct MatmulBatches {
  int64_t m = 1, n = 1, k = 1;
  bool ta = false, tb = false;
  int64_t lda = 1, ldb = 1;  // row lengths of A's and B's matrices as stored
  ir::Shape batch_a, batch_b;
  /// Per output matrix t (row-major over the broadcast batch), the element
  /// offsets of its A and B matrices.
  std::vector<std::pair<int64_t, int64_t>> offsets;
};

inline MatmulBatches matmul_batches(const ir::Shape& as, const ir::Shape& bs, bool ta = false,
                                    bool tb = false) {
  MatmulBatches r;
  r.ta = ta && as.size() >= 2;
  r.tb = tb && bs.size() >= 2;
  const size_t ra = as.size(), rb = bs.size();
  r.m = ra >= 2 ? as[ra - (r.ta ? 1 : 2)] : 1;
  r.k = r.ta ? as[ra - 2] : as.back();
  r.n = rb >= 2 ? bs[rb - (r.tb ? 2 : 1)] : 1;
  r.lda = r.ta ? r.m : r.k;
  r.ldb = r.tb ? r.k : r.n;
  r.batch_a.assign(as.begin(), as.end() - (as.size() >= 2 ? 2 : 1));
  r.batch_b.assign(bs.begin(), bs.end() - (bs.size() >= 2 ? 2 : 1));
  const size_t rank = std::max(r.batch_a.size(), r.batch_b.size());
  ir::Shape batch(rank);
  std::vector<int64_t> stride_a(rank, 0), stride_b(rank, 0);
  int64_t sa = r.m * r.k, sb = r.k * r.n;
  for (size_t i = rank; i-- > 0;) {
    const size_t ia = i + r.batch_a.size(), ib = i + r.batch_b.size();  // index + own rank - rank
    const int64_t da = ia >= rank ? r.batch_a[ia - rank] : 1;
    const int64_t db = ib >= rank ? r.batch_b[ib - rank] : 1;
    batch[i] = std::max(da, db);
    stride_a[i] = da == 1 ? 0 : sa;
    stride_b[i] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
  }
  const int64_t count = ir::numel(batch);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t t = 0; t < count; ++t) {
    int64_t oa = 0, ob = 0;
    for (size_t i = 0; i < rank; ++i) {
      oa += idx[i] * stride_a[i];
      ob += idx[i] * stride_b[i];
    }
    r.offsets.emplace_back(oa, ob);
    for (size_t i = rank; i-- > 0;) {  // next batch index, last axis fastest
      if (++idx[i] < batch[i]) break;
      idx[i] = 0;
    }
  }
  return r;
}

}  // namespace pipetrain::exec::device
