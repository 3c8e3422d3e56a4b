// Einsum expanded at import (importer/einsum_expansion.cc) against a naive
// loop over every subscript assignment. ONNX's Einsum node tests are all
// float64, which pipetrain does not run, so the forms are covered here:
// matmul, batched, attention scores, inner and outer products, transpose,
// full sum, diagonals, broadcasting ellipses, three operands, implicit output.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "ir/shape.h"
#include "tests/importer/model_util.h"

namespace pipetrain {
namespace {

using test::filled;

using test::error_of;

std::string dims(const ir::Shape& s) {
  std::string out;
  for (size_t k = 0; k < s.size(); ++k) {
    if (k > 0) out += ", ";
    out += std::to_string(s[k]);
  }
  return out;
}

/// sum over every assignment of the subscripts of prod operand[subs], in
/// double; `eq` has letters only and an explicit output. A size-1 axis
/// broadcasts (reads index 0).
std::vector<double> naive(const std::string& eq, const std::vector<ir::Tensor>& xs,
                          const ir::Shape& out_shape) {
  const size_t arrow = eq.find("->");
  std::vector<std::string> subs;
  for (size_t at = 0;;) {
    const size_t comma = eq.find(',', at);
    subs.push_back(eq.substr(at, std::min(comma, arrow) - at));
    if (comma == std::string::npos || comma > arrow) break;
    at = comma + 1;
  }
  const std::string out = eq.substr(arrow + 2);
  std::map<char, int64_t> size;
  for (size_t i = 0; i < xs.size(); ++i)
    for (size_t k = 0; k < subs[i].size(); ++k)
      size[subs[i][k]] = std::max(size[subs[i][k]], xs[i].shape()[k]);
  std::string letters;
  for (const auto& [c, n] : size) letters += c;
  std::vector<double> y(static_cast<size_t>(ir::numel(out_shape)), 0.0);
  std::map<char, int64_t> at;
  for (char c : letters) at[c] = 0;
  while (true) {
    double p = 1;
    for (size_t i = 0; i < xs.size(); ++i) {
      int64_t off = 0;
      for (size_t k = 0; k < subs[i].size(); ++k)
        off = off * xs[i].shape()[k] + (xs[i].shape()[k] == 1 ? 0 : at[subs[i][k]]);
      p *= xs[i].data<float>()[off];
    }
    int64_t o = 0;
    for (size_t k = 0; k < out.size(); ++k) o = o * out_shape[k] + at[out[k]];
    y[static_cast<size_t>(o)] += p;
    size_t k = letters.size();
    while (k > 0 && ++at[letters[k - 1]] == size[letters[k - 1]]) at[letters[--k]] = 0;
    if (k == 0) break;
  }
  return y;
}

struct Case {
  std::string equation;   // as the model writes it
  std::string reference;  // letters only, explicit output
  std::vector<ir::Shape> shapes;
  ir::Shape out;
};

TEST(EinsumExpansion, MatchesTheNaiveSum) {
  const std::vector<Case> cases = {
      {"ij,jk->ik", "ij,jk->ik", {{3, 4}, {4, 5}}, {3, 5}},
      {"ij,jk", "ij,jk->ik", {{3, 4}, {4, 5}}, {3, 5}},  // implicit output
      {"bij,bjk->bik", "bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}, {2, 3, 5}},
      {"bhqd,bhkd->bhqk", "bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}, {2, 2, 3, 5}},
      {"i,i", "i,i->", {{6}, {6}}, {}},
      {"i,j->ij", "i,j->ij", {{3}, {4}}, {3, 4}},
      {"ij->ji", "ij->ji", {{3, 4}}, {4, 3}},
      {"ij->", "ij->", {{3, 4}}, {}},
      {"ii->i", "ii->i", {{4, 4}}, {4}},
      {"...ii->...i", "xii->xi", {{2, 3, 3}}, {2, 3}},
      {"ij,j->i", "ij,j->i", {{3, 4}, {4}}, {3}},
      {"...ij,...jk->...ik", "aij,ajk->aik", {{2, 3, 4}, {1, 4, 5}}, {2, 3, 5}},
      {"abc,cd,de->abe", "abc,cd,de->abe", {{2, 3, 4}, {4, 5}, {5, 2}}, {2, 3, 2}},
      {"bij , bkj -> bik", "bij,bkj->bik", {{2, 3, 4}, {2, 5, 4}}, {2, 3, 5}},
  };
  for (const auto& c : cases) {
    std::string sig, args;
    std::map<std::string, ir::Tensor> feeds;
    std::vector<ir::Tensor> xs;
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      std::string name = std::to_string(i);
      name.insert(name.begin(), 'x');
      if (i > 0) {
        sig += ", ";
        args += ", ";
      }
      sig += "float[";
      sig += dims(c.shapes[i]);
      sig += "] ";
      sig += name;
      args += name;
      xs.push_back(filled(c.shapes[i], static_cast<uint32_t>(i + 7)));
      feeds[name] = xs.back();
    }
    // A scalar output is written without dims ("float[]" is no shape in the text syntax).
    const std::string out_type = c.out.empty() ? "float" : "float[" + dims(c.out) + "]";
    const std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\ng (" + sig + ") => (" +
                             out_type + " y)\n{\n  y = Einsum <equation = \"" + c.equation +
                             "\"> (" + args + ")\n}\n";
    SCOPED_TRACE(c.equation);
    ir::Graph g = test::import_text(text);
    auto backend = exec::make_cpu_backend();
    const auto y = exec::ForwardRunner(g, *backend).run(feeds).at("y");
    ASSERT_EQ(y.shape(), c.out);
    const std::vector<double> want = naive(c.reference, xs, c.out);
    for (int64_t k = 0; k < y.numel(); ++k)
      EXPECT_NEAR(y.data<float>()[k], want[static_cast<size_t>(k)], 1e-5) << k;
    bool uses_matmul = false;
    for (const auto& node : g.nodes) uses_matmul = uses_matmul || node.op_type == "MatMul";
    if (c.equation == "bhqd,bhkd->bhqk") {
      EXPECT_TRUE(uses_matmul) << "attention scores are a MatMul";
    }
  }
}

TEST(EinsumExpansion, RefusesBadEquations) {
  auto msg = error_of<ModelError>([] {
    test::import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[3, 4] a, float[5, 6] b) => (float[3, 6] y)
{
  y = Einsum <equation = "ij,jk->ik"> (a, b)
}
)");
  });
  EXPECT_NE(msg.find("Einsum"), std::string::npos) << msg;
  EXPECT_NE(msg.find("subscript 'j' is 4 in one operand and 5 in another"), std::string::npos)
      << msg;
  msg = error_of<ModelError>([] {
    test::import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[3, 4] a) => (float[3] y)
{
  y = Einsum <equation = "ij->iz"> (a)
}
)");
  });
  EXPECT_NE(msg.find("output subscript 'z' is in no operand"), std::string::npos) << msg;
}

}  // namespace
}  // namespace pipetrain
