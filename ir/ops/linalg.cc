// Gemm and MatMul.
#include <string>
#include <utility>

#include "ir/error.h"
#include "ir/op_registry.h"

namespace pipetrain::ir {

// Y (M, N) = alpha * A' B' + beta * C, A' = transA ? A^T : A (M, K),
// B' = transB ? B^T : B (K, N), C unidirectionally broadcast to (M, N).
OpSchema schema_Gemm() {
  OpSchema s;
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.attrs = {{"alpha", AttrType::kFloat},
             {"beta", AttrType::kFloat},
             {"transA", AttrType::kInt},
             {"transB", AttrType::kInt},
             // pipetrain's own: the ReLU fused into it (ir/passes/fusion.h).
             {"activation", AttrType::kString}};
  s.infer = [](InferContext& c) {
    const Shape& a = c.shape(0);
    const Shape& b = c.shape(1);
    const std::string activation = c.node().attr_string("activation", "");
    if (!activation.empty() && activation != "Relu")
      c.fail("activation '" + activation + "' is not supported (Relu only)");
    if (a.size() != 2 || b.size() != 2)
      c.fail("A " + shape_str(a) + " and B " + shape_str(b) + " must be matrices");
    if (c.dtype(1) != c.dtype(0)) c.fail("A and B must have the same dtype");
    bool ta = c.node().attr_int("transA", 0) != 0;
    bool tb = c.node().attr_int("transB", 0) != 0;
    int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1];
    int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
    if (k != kb)
      c.fail("inner dimensions differ: A " + shape_str(a) + (ta ? " (transposed)" : "") +
             " and B " + shape_str(b) + (tb ? " (transposed)" : ""));
    if (c.has_input(2)) {
      const Shape& cs = c.shape(2);
      bool ok = cs.size() <= 2 && c.dtype(2) == c.dtype(0);
      Shape mn = {m, n};
      for (size_t i = 0; ok && i < cs.size(); ++i) {
        int64_t want = mn[2 - cs.size() + i];
        ok = cs[i] == 1 || cs[i] == want;
      }
      if (!ok)
        c.fail("C " + std::string(dtype_name(c.dtype(2))) + " " + shape_str(cs) +
               " does not broadcast to the output " + shape_str(mn));
    }
    c.set_output(0, c.dtype(0), {m, n});
  };
  return s;
}

// numpy matmul: a 1-D A is (1, K) and a 1-D B is (K, 1) with the added axis
// dropped from the result; leading (batch) axes broadcast. transA / transB
// (not ONNX's: the gradient pass sets them, ONNX's checker refuses them in a
// model file) read a matrix operand with its last two axes swapped, so dY B^T
// and A^T dY need no Transpose node.
OpSchema schema_MatMul() {
  OpSchema s;
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.attrs = {{"transA", AttrType::kInt}, {"transB", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    Shape a = c.shape(0);
    Shape b = c.shape(1);
    if (a.empty() || b.empty())
      c.fail("operands must have rank >= 1, got " + shape_str(a) + " and " + shape_str(b));
    for (auto [key, operand] : {std::pair{"transA", &a}, std::pair{"transB", &b}}) {
      if (c.node().attr_int(key, 0) == 0) continue;
      if (operand->size() < 2)
        c.fail(std::string(key) + " needs a matrix operand, got " + shape_str(*operand));
      std::swap(operand->back(), (*operand)[operand->size() - 2]);
    }
    if (c.dtype(1) != c.dtype(0)) c.fail("A and B must have the same dtype");
    int64_t k_a = a.back();
    int64_t k_b = b.size() == 1 ? b[0] : b[b.size() - 2];
    if (k_a != k_b)
      c.fail("inner dimensions of " + shape_str(a) + " and " + shape_str(b) + " differ");
    Shape batch_a(a.begin(), a.end() - (a.size() >= 2 ? 2 : 1));
    Shape batch_b(b.begin(), b.end() - (b.size() >= 2 ? 2 : 1));
    Shape y;
    try {
      y = broadcast_shapes(batch_a, batch_b);
    } catch (const ModelError&) {
      c.fail("batch dimensions of " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
    }
    if (a.size() >= 2) y.push_back(a[a.size() - 2]);
    if (b.size() >= 2) y.push_back(b.back());
    c.set_output(0, c.dtype(0), y);
  };
  return s;
}

}  // namespace pipetrain::ir
