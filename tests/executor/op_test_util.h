// Builds a one-node graph, infers its shapes with the op's schema and runs it
// on the CPU backend. For kernel tests that need no ONNX file.
#pragma once

#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/op_registry.h"

namespace pipetrain::test {

struct OpInput {
  ir::Tensor value;
  bool constant = false;  // stored as a graph constant (shape rules may read it)
  bool absent = false;    // an absent optional input ("")
};

inline OpInput in(ir::Tensor t) {
  return {std::move(t), false, false};
}
inline OpInput constant(ir::Tensor t) {
  return {std::move(t), true, false};
}
inline OpInput absent() {
  return {ir::Tensor(), false, true};
}

/// Runs `op` with the given inputs and attributes; returns its outputs in order.
/// Outputs listed in `absent_outputs` are left out of the node ("") and come
/// back undefined.
inline std::vector<ir::Tensor> run_op(const std::string& op, const std::vector<OpInput>& inputs,
                                      std::map<std::string, ir::Attribute> attrs = {},
                                      size_t num_outputs = 1, bool training = false,
                                      uint64_t seed = 0,
                                      const std::set<size_t>& absent_outputs = {},
                                      exec::Backend* on = nullptr) {
  ir::Graph g;
  g.name = "single_" + op;
  ir::Node n;
  n.name = op + "_0";
  n.op_type = op;
  n.attrs = std::move(attrs);
  std::map<std::string, ir::Tensor> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].absent) {
      n.inputs.push_back("");
      continue;
    }
    std::string name = "in" + std::to_string(i);
    n.inputs.push_back(name);
    if (inputs[i].constant) {
      g.set_value(name, inputs[i].value, ir::Role::kConstant);
    } else {
      g.set_tensor({name, inputs[i].value.dtype(), inputs[i].value.shape(), ir::Role::kInput});
      g.inputs.push_back(name);
      feeds[name] = inputs[i].value;
    }
  }
  for (size_t k = 0; k < num_outputs; ++k) {
    if (absent_outputs.count(k)) {
      n.outputs.push_back("");
      continue;
    }
    n.outputs.push_back("out" + std::to_string(k));
    g.outputs.push_back("out" + std::to_string(k));
  }
  g.nodes.push_back(std::move(n));
  g.infer_shapes();
  g.verify();
  auto cpu = on ? nullptr : exec::make_cpu_backend();
  exec::ForwardRunner runner(g, on ? *on : *cpu);
  exec::RunOptions opts;
  opts.training = training;
  opts.seed = seed;
  auto outs = runner.run(feeds, opts);
  std::vector<ir::Tensor> result;
  for (size_t k = 0; k < num_outputs; ++k)
    result.push_back(absent_outputs.count(k) ? ir::Tensor() : outs.at("out" + std::to_string(k)));
  return result;
}

/// Largest |a - b| / (atol + rtol |b|) over all elements; <= 1 means close.
inline double closeness(const ir::Tensor& a, const ir::Tensor& b, double rtol = 1e-4,
                        double atol = 1e-5) {
  if (a.shape() != b.shape()) return 1e30;
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.at(i), y = b.at(i);
    double r = std::abs(x - y) / (atol + rtol * std::abs(y));
    if (std::isnan(x) != std::isnan(y)) r = 1e30;
    if (r > worst) worst = r;
  }
  return worst;
}

}  // namespace pipetrain::test
