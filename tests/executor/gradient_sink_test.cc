// Gradient sinks (RunOptions::sinks): a run sums graph outputs into buffers
// of the caller's, written by the producing GEMM itself (beta = 1) where it
// can and added by the runner otherwise, and gives the sums of separate runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "autodiff/autodiff.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "ir/error.h"
#include "tests/autodiff/grad_check.h"
#include "tests/executor/test_models.h"

namespace pipetrain {
namespace {

using TensorMap = std::map<std::string, ir::Tensor>;

TensorMap batch(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> labels(8);
  for (auto& l : labels) l = static_cast<int64_t>(rng() % 10);
  return {{"x", test::random_tensor({8, 2, 8}, test::Gen::kUniform, rng)},
          {"y", ir::Tensor::from_i64(labels, {8})}};
}

// A buffer of t's shape full of NaN: an overwriting run must not read it.
ir::Tensor nan_like(const ir::Tensor& t) {
  ir::Tensor out(t.dtype(), t.shape());
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data<float>()[i] = std::numeric_limits<float>::quiet_NaN();
  return out;
}

bool same_bits(const ir::Tensor& a, const ir::Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// |sum - (a + b)| within float32 rounding of adding a in another place of
// b's sum: 2 eps (|a| + the sum of |b|'s terms), elementwise. `b_terms`
// holds that sum (|alpha| |A'||B'| + |beta| |C|); without it, |b|.
void expect_sum(const ir::Tensor& sum, const ir::Tensor& a, const ir::Tensor& b,
                const std::string& what, const std::vector<double>* b_terms = nullptr) {
  ASSERT_EQ(sum.shape(), a.shape()) << what;
  const double eps = std::numeric_limits<float>::epsilon();
  for (int64_t i = 0; i < sum.numel(); ++i) {
    const double x = a.data<float>()[i], y = b.data<float>()[i];
    const double terms = b_terms ? (*b_terms)[static_cast<size_t>(i)] : std::abs(y);
    EXPECT_LE(std::abs(sum.data<float>()[i] - (x + y)), 2 * eps * (std::abs(x) + terms))
        << what << " element " << i;
  }
}

// Row-major (m, n) of |alpha| sum_p |A'(i, p)| |B'(p, j)| + |beta| |C(i, j)| for a
// 2-D Gemm (C broadcast), or sum_p |A'(i, p)| |B'(p, j)| over MatMul's batches.
std::vector<double> gemm_terms(const ir::Tensor& a, const ir::Tensor& b, const ir::Tensor* c,
                               int64_t ta, int64_t tb, double alpha, double beta,
                               const ir::Shape& y) {
  const int64_t m = y[y.size() - 2], n = y.back();
  const int64_t k = ta ? a.shape()[a.shape().size() - 2] : a.shape().back();
  const int64_t batches = ir::numel(y) / (m * n);
  const int64_t a_batches = a.numel() / (m * k), b_batches = b.numel() / (k * n);
  std::vector<double> out(static_cast<size_t>(ir::numel(y)));
  for (int64_t t = 0; t < batches; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        // MatMul here broadcasts B over A's batches (a_batches = batches) or pairs them.
        const float* ad = a.data<float>() + (t % a_batches) * m * k;
        const float* bd = b.data<float>() + (t % b_batches) * k * n;
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += std::abs(ad[ta ? p * m + i : i * k + p]) * std::abs(bd[tb ? j * k + p : p * n + j]);
        double cv = 0;
        if (c) {
          const ir::Shape& cs = c->shape();
          const int64_t ci = cs.size() == 2 && cs[0] != 1 ? i : 0;
          const int64_t cj = !cs.empty() && cs.back() != 1 ? j : 0;
          cv = std::abs(c->data<float>()[ci * (cs.empty() ? 1 : cs.back()) + cj]);
        }
        out[static_cast<size_t>((t * m + i) * n + j)] = std::abs(alpha) * s + std::abs(beta) * cv;
      }
  return out;
}

TEST(GradientSinks, GemmGradientsAreWrittenInPlaceOthersAdded) {
  auto m = testing_models::reshape_mlp();
  auto backend = exec::make_cpu_backend();
  exec::ForwardRunner runner(m.graph, *backend);
  EXPECT_TRUE(runner.accumulates_in_place(m.grads.at("w1")));   // Gemm
  EXPECT_TRUE(runner.accumulates_in_place(m.grads.at("w2")));   // MatMul's rule: Gemm + Reshape
  EXPECT_FALSE(runner.accumulates_in_place(m.grads.at("b1")));  // ReduceSum
  EXPECT_FALSE(runner.accumulates_in_place("loss"));            // not a GEMM either
}

TEST(GradientSinks, TwoRunsSumIntoTheSinks) {
  auto m = testing_models::reshape_mlp();
  auto backend = exec::make_cpu_backend();
  const TensorMap b1 = batch(11), b2 = batch(12);
  auto plain1 = exec::ForwardRunner(m.graph, *backend).run(b1);
  auto plain2 = exec::ForwardRunner(m.graph, *backend).run(b2);

  std::set<std::string> outputs;
  TensorMap sinks;
  for (const auto& [param, grad] : m.grads) {
    outputs.insert(grad);
    sinks[grad] = nan_like(plain1.at(grad));
  }
  for (bool planned : {false, true}) {
    SCOPED_TRACE(planned ? "planned arena" : "own buffers");
    exec::ForwardRunner runner(m.graph, *backend, planned, outputs);
    if (planned) {
      runner.poison_arena();
      // The GEMMs' results live in the sinks: the arena holds no room for them.
      for (const std::string p : {"w1", "w2"}) {
        const exec::TensorSlot& s = runner.memory_plan()->slots.at(m.grads.at(p));
        EXPECT_EQ(runner.memory_plan()->slots.at(s.root).bytes, 0u) << p;
      }
    }
    exec::RunOptions first;
    first.sinks = &sinks;
    first.sinks_overwrite = true;
    auto outs = runner.run(b1, first);
    for (const auto& [param, grad] : m.grads) {
      EXPECT_EQ(outs.at(grad).raw(), sinks.at(grad).raw()) << param << ": not the sink";
      EXPECT_TRUE(same_bits(sinks.at(grad), plain1.at(grad))) << param << " after one run";
    }
    EXPECT_TRUE(same_bits(outs.at("loss"), plain1.at("loss")));
    exec::RunOptions more;
    more.sinks = &sinks;
    runner.run(b2, more);
    for (const auto& [param, grad] : m.grads)
      expect_sum(sinks.at(grad), plain1.at(grad), plain2.at(grad), param);
    // b1's gradient is added by the runner: exactly the float sum.
    const ir::Tensor& gb = sinks.at(m.grads.at("b1"));
    for (int64_t i = 0; i < gb.numel(); ++i)
      EXPECT_EQ(gb.data<float>()[i], plain1.at(m.grads.at("b1")).data<float>()[i] +
                                         plain2.at(m.grads.at("b1")).data<float>()[i]);
    for (auto& [grad, t] : sinks) t = nan_like(t);
  }
  // A run without its planned sinks still computes every output.
  exec::ForwardRunner runner(m.graph, *backend, true, outputs);
  auto outs = runner.run(b2);
  for (const auto& [param, grad] : m.grads)
    EXPECT_TRUE(same_bits(outs.at(grad), plain2.at(grad))) << param << " without a sink";
}

// One GEMM node whose output is the graph's output: every transpose, the bias
// shapes, a small product (dnnl_sgemm) and a large one (OpenBLAS), and
// batched MatMuls, each adding alpha A'B' + beta C to what the sink held.
TEST(GradientSinks, GemmKernelsAddToTheSink) {
  auto backend = exec::make_cpu_backend();
  std::mt19937_64 rng(7);
  struct Case {
    std::string op;
    ir::Shape a, b, c;
    int64_t ta = 0, tb = 0;
  };
  std::vector<Case> cases;
  for (int64_t ta = 0; ta < 2; ++ta)
    for (int64_t tb = 0; tb < 2; ++tb) {
      cases.push_back({"Gemm",
                       ta ? ir::Shape{5, 3} : ir::Shape{3, 5},
                       tb ? ir::Shape{4, 5} : ir::Shape{5, 4},
                       {},
                       ta,
                       tb});
      cases.push_back({"Gemm",
                       ta ? ir::Shape{170, 130} : ir::Shape{130, 170},
                       tb ? ir::Shape{200, 170} : ir::Shape{170, 200},
                       {200},
                       ta,
                       tb});
    }
  cases.push_back({"Gemm", {3, 5}, {5, 4}, {3, 1}});
  cases.push_back({"Gemm", {3, 5}, {5, 4}, {3, 4}});
  cases.push_back({"MatMul", {6, 7, 9}, {9, 5}, {}});
  cases.push_back({"MatMul", {2, 6, 7, 9}, {2, 1, 9, 5}, {}});
  // Batches of one shape run as one oneDNN matmul (a sum post-op adds); transposed operands.
  cases.push_back({"MatMul", {2, 6, 7, 9}, {2, 6, 9, 5}, {}});
  cases.push_back({"MatMul", {3, 9, 7}, {3, 5, 9}, {}, 1, 1});
  cases.push_back({"MatMul", {3, 9, 7}, {9, 5}, {}, 1, 0});  // one B, A transposed: the loop
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op + " A " + ir::shape_str(c.a) + " B " + ir::shape_str(c.b) + " C " +
                 ir::shape_str(c.c));
    ir::Graph g;
    TensorMap feeds = {{"a", test::random_tensor(c.a, test::Gen::kUniform, rng)},
                       {"b", test::random_tensor(c.b, test::Gen::kUniform, rng)}};
    ir::Node n{"n", c.op, {"a", "b"}, {"y"}, {}};
    if (!c.c.empty()) {
      feeds["c"] = test::random_tensor(c.c, test::Gen::kUniform, rng);
      n.inputs.push_back("c");
    }
    if (c.op == "Gemm")
      n.attrs = {{"transA", ir::Attribute(c.ta)},
                 {"transB", ir::Attribute(c.tb)},
                 {"alpha", ir::Attribute(0.75f)},
                 {"beta", ir::Attribute(-1.25f)}};
    else
      for (auto [key, on] : {std::pair{"transA", c.ta}, std::pair{"transB", c.tb}})
        if (on) n.attrs[key] = ir::Attribute(on);
    for (const auto& [name, t] : feeds) {
      g.set_tensor({name, ir::DType::kF32, t.shape(), ir::Role::kInput});
      g.inputs.push_back(name);
    }
    g.nodes.push_back(n);
    g.outputs = {"y"};
    g.infer_shapes();
    exec::ForwardRunner runner(g, *backend, true, {"y"});
    ASSERT_TRUE(runner.accumulates_in_place("y"));
    const ir::Tensor product = exec::ForwardRunner(g, *backend).run(feeds).at("y");
    const ir::Tensor held = test::random_tensor(product.shape(), test::Gen::kUniform, rng);
    TensorMap sinks = {{"y", held.clone()}};
    exec::RunOptions o;
    o.sinks = &sinks;
    runner.run(feeds, o);
    const bool gemm = c.op == "Gemm";
    const std::vector<double> terms =
        gemm_terms(feeds.at("a"), feeds.at("b"), c.c.empty() ? nullptr : &feeds.at("c"), c.ta, c.tb,
                   gemm ? 0.75 : 1.0, gemm ? -1.25 : 0.0, product.shape());
    expect_sum(sinks.at("y"), held, product, "y", &terms);
  }
}

TEST(GradientSinks, AGemmResultOthersReadIsAddedByTheRunner) {
  // h is a graph output and Relu reads it: summing into h's buffer would
  // change what Relu sees, so the runner adds it after the run instead.
  ir::Graph g;
  g.set_tensor({"a", ir::DType::kF32, {4, 3}, ir::Role::kInput});
  g.set_tensor({"b", ir::DType::kF32, {3, 2}, ir::Role::kInput});
  g.inputs = {"a", "b"};
  g.nodes.push_back({"mm", "MatMul", {"a", "b"}, {"h"}, {}});
  g.nodes.push_back({"act", "Relu", {"h"}, {"r"}, {}});
  g.outputs = {"h", "r"};
  g.infer_shapes();
  auto backend = exec::make_cpu_backend();
  exec::ForwardRunner runner(g, *backend, true, {"h"});
  EXPECT_FALSE(runner.accumulates_in_place("h"));
  std::mt19937_64 rng(9);
  TensorMap feeds = {{"a", test::random_tensor({4, 3}, test::Gen::kUniform, rng)},
                     {"b", test::random_tensor({3, 2}, test::Gen::kUniform, rng)}};
  const auto plain = exec::ForwardRunner(g, *backend).run(feeds);
  const ir::Tensor held = test::random_tensor({4, 2}, test::Gen::kUniform, rng);
  TensorMap sinks = {{"h", held.clone()}};
  exec::RunOptions o;
  o.sinks = &sinks;
  auto outs = runner.run(feeds, o);
  EXPECT_TRUE(same_bits(outs.at("r"), plain.at("r")));
  for (int64_t i = 0; i < held.numel(); ++i)
    EXPECT_EQ(sinks.at("h").data<float>()[i],
              held.data<float>()[i] + plain.at("h").data<float>()[i]);
}

TEST(GradientSinks, AMismatchedSinkIsRefusedByName) {
  auto m = testing_models::reshape_mlp();
  auto backend = exec::make_cpu_backend();
  exec::ForwardRunner runner(m.graph, *backend, true);
  const std::string gw = m.grads.at("w1");
  for (const auto& [name, sink] : std::vector<std::pair<std::string, ir::Tensor>>{
           {gw, ir::Tensor(ir::DType::kF32, {32, 16})},
           {"nope", ir::Tensor(ir::DType::kF32, {1})}}) {
    TensorMap sinks = {{name, sink}};
    exec::RunOptions o;
    o.sinks = &sinks;
    try {
      runner.run(batch(1), o);
      ADD_FAILURE() << name << ": no error";
    } catch (const RuntimeFault& e) {
      EXPECT_NE(std::string(e.what()).find("sink '" + name + "'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace pipetrain
