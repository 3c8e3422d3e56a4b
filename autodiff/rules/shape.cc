// Gradients of the shape ops and the reductions.
#include "autodiff/grad_builder.h"

namespace pipetrain::autodiff {

namespace {

using ir::Attribute;

// Reshape, Flatten, Squeeze, Unsqueeze: the gradient takes the input's shape back.
void reshape_grad(GradBuilder& b) {
  b.set_GI(0, b.reshape(b.GO(0), b.shape(b.I(0))));
}
void identity_grad(GradBuilder& b) {
  b.set_GI(0, b.GO(0));
}

// The inverse permutation undoes the transpose.
void transpose_grad(GradBuilder& b) {
  const int64_t r = static_cast<int64_t>(b.shape(b.I(0)).size());
  std::vector<int64_t> perm = b.node().attr_ints("perm");
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  b.set_GI(0, b.emit1("Transpose", {b.GO(0)}, {{"perm", Attribute(inv)}}));
}

void expand_grad(GradBuilder& b) {
  b.set_GI(0, b.reduce_to(b.GO(0), b.shape(b.I(0))));
}

/// The reduced axes of a Reduce* node (normalised), or nullopt for the identity
/// (no axes with noop_with_empty_axes = 1).
std::optional<std::vector<bool>> reduced_axes(GradBuilder& b) {
  const size_t r = b.shape(b.I(0)).size();
  std::vector<int64_t> axes;
  if (b.has_I(1)) {
    const ir::Tensor* v = b.value(b.I(1));
    if (!v) b.unsupported("axes that are not a constant");
    axes = v->to_i64();
  } else {
    axes = b.node().attr_ints("axes");
  }
  if (axes.empty() && b.node().attr_int("noop_with_empty_axes", 0) != 0) return std::nullopt;
  std::vector<bool> reduced(r, axes.empty());
  for (int64_t a : axes)
    reduced[static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(r) : a)] = true;
  return reduced;
}

/// dY reshaped to the input's rank (reduced axes of size 1) and expanded to it.
std::string expand_back(GradBuilder& b, const std::string& t, const std::vector<bool>& reduced) {
  ir::Shape x = b.shape(b.I(0)), keep = x;
  for (size_t i = 0; i < x.size(); ++i)
    if (reduced[i]) keep[i] = 1;
  return b.emit1("Expand", {b.reshape(t, keep), b.ints(x)});
}

void reduce_sum_grad(GradBuilder& b) {
  auto reduced = reduced_axes(b);
  if (!reduced) return identity_grad(b);
  b.set_GI(0, expand_back(b, b.GO(0), *reduced));
}

void reduce_mean_grad(GradBuilder& b) {
  auto reduced = reduced_axes(b);
  if (!reduced) return identity_grad(b);
  const ir::Shape x = b.shape(b.I(0));
  int64_t count = 1;
  for (size_t i = 0; i < x.size(); ++i)
    if ((*reduced)[i]) count *= x[i];
  std::string scaled = b.emit1("Mul", {b.GO(0), b.scalar(1.0f / static_cast<float>(count))});
  b.set_GI(0, expand_back(b, scaled, *reduced));
}

// The gradient is shared equally among the elements equal to the maximum
// (minimum) (as PyTorch's amax / amin).
void reduce_select_grad(GradBuilder& b) {
  auto reduced = reduced_axes(b);
  if (!reduced) return identity_grad(b);
  const std::string x = b.I(0);
  std::string is_max = b.emit1("Equal", {x, expand_back(b, b.O(0), *reduced)});
  std::string ones =
      b.emit1("Cast", {is_max}, {{"to", Attribute(static_cast<int64_t>(b.dtype(x)))}});
  std::vector<int64_t> axes;
  for (size_t i = 0; i < reduced->size(); ++i)
    if ((*reduced)[i]) axes.push_back(static_cast<int64_t>(i));
  std::string count =
      b.emit1("ReduceSum", {ones, b.ints(axes)}, {{"keepdims", Attribute(int64_t{1})}});
  std::string share = b.emit1("Div", {expand_back(b, b.GO(0), *reduced), count});
  b.set_GI(0, b.emit1("Mul", {share, ones}));
}

// dX = dY' f(X, Y') for the mapped sums, with ' the expansion back to X's shape.
template <typename F>
void reduce_map_grad(GradBuilder& b, F&& local) {
  auto reduced = reduced_axes(b);
  if (!reduced) return identity_grad(b);
  const std::string dy = expand_back(b, b.GO(0), *reduced), y = expand_back(b, b.O(0), *reduced);
  b.set_GI(0, b.emit1("Mul", {dy, local(b.I(0), y)}));
}
// Prod: dX = dY Y / X (X with zeros gives NaN there, unlike PyTorch's exclusive products).
void reduce_prod_grad(GradBuilder& b) {
  reduce_map_grad(b, [&](const std::string& x, const std::string& y) {
    return b.emit1("Div", {y, x});
  });
}
// L1: dX = dY sign(X)
void reduce_l1_grad(GradBuilder& b) {
  reduce_map_grad(b,
                  [&](const std::string& x, const std::string&) { return b.emit1("Sign", {x}); });
}
// L2: dX = dY X / Y
void reduce_l2_grad(GradBuilder& b) {
  reduce_map_grad(b, [&](const std::string& x, const std::string& y) {
    return b.emit1("Div", {x, y});
  });
}
// SumSquare: dX = 2 dY X
void reduce_sum_square_grad(GradBuilder& b) {
  reduce_map_grad(b, [&](const std::string& x, const std::string&) {
    return b.emit1("Mul", {x, b.scalar(2.0f)});
  });
}
// LogSum: dX = dY / e^Y (the sum)
void reduce_log_sum_grad(GradBuilder& b) {
  reduce_map_grad(b, [&](const std::string&, const std::string& y) {
    return b.emit1("Exp", {b.emit1("Neg", {y})});
  });
}
// LogSumExp: dX = dY e^(X - Y) (the softmax over the reduced axes)
void reduce_log_sum_exp_grad(GradBuilder& b) {
  reduce_map_grad(b, [&](const std::string& x, const std::string& y) {
    return b.emit1("Exp", {b.emit1("Sub", {x, y})});
  });
}

// Trilu is linear and masks dY the same way.
void trilu_grad(GradBuilder& b) {
  std::vector<std::string> in = {b.GO(0)};
  if (b.has_I(1)) in.push_back(b.I(1));
  b.set_GI(0, b.emit1("Trilu", in, {{"upper", Attribute(b.node().attr_int("upper", 1))}}));
}

// Tile: dX sums dY's tiles: dY viewed as (r0, d0, r1, d1, ...) summed over the r axes.
void tile_grad(GradBuilder& b) {
  const ir::Shape x = b.shape(b.I(0)), y = b.shape(b.O(0));
  ir::Shape split;
  std::vector<int64_t> tiles;
  for (size_t d = 0; d < x.size(); ++d) {
    tiles.push_back(static_cast<int64_t>(split.size()));
    split.push_back(x[d] == 0 ? 0 : y[d] / x[d]);
    split.push_back(x[d]);
  }
  std::string sum = b.emit1("ReduceSum", {b.reshape(b.GO(0), split), b.ints(tiles)},
                            {{"keepdims", Attribute(int64_t{0})}});
  b.set_GI(0, b.reshape(sum, x));
}

// CumSum: dX is dY summed the other way (exclusive stays exclusive).
void cum_sum_grad(GradBuilder& b) {
  const auto& n = b.node();
  b.set_GI(0, b.emit1("CumSum", {b.GO(0), b.I(1)},
                      {{"exclusive", Attribute(n.attr_int("exclusive", 0))},
                       {"reverse", Attribute(int64_t{n.attr_int("reverse", 0) == 0})}}));
}

// Resize is linear in X: ResizeGrad applies its transpose (roi, scales and
// sizes are constants).
void resize_grad(GradBuilder& b) {
  const ir::Node& n = b.node();
  std::vector<std::string> in = {b.GO(0)};
  for (size_t i = 1; i < 4; ++i) in.push_back(b.has_I(i) ? b.I(i) : "");
  while (in.back().empty()) in.pop_back();
  std::map<std::string, Attribute> attrs = n.attrs;
  attrs["input_shape"] = Attribute(std::vector<int64_t>(b.shape(b.I(0))));
  b.set_GI(0, b.emit1("ResizeGrad", in, attrs));
}

// GridSample: both gradients from one GridSampleGrad, each output only where wanted.
void grid_sample_grad(GradBuilder& b) {
  auto outs = b.emit("GridSampleGrad", {b.GO(0), b.I(0), b.I(1)}, 2, b.node().attrs);
  for (size_t i = 0; i < 2; ++i)
    if (b.wants(i)) b.set_GI(i, outs[i]);
}

}  // namespace

void register_shape_rules(std::map<std::string, RuleEntry>& r) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}) r[op] = {reshape_grad};
  r["Identity"] = {identity_grad};
  r["Transpose"] = {transpose_grad};
  r["Expand"] = {expand_grad};
  r["ReduceSum"] = {reduce_sum_grad};
  r["ReduceMean"] = {reduce_mean_grad};
  r["ReduceMax"] = {reduce_select_grad};
  r["ReduceMin"] = {reduce_select_grad};
  r["ReduceProd"] = {reduce_prod_grad};
  r["ReduceL1"] = {reduce_l1_grad};
  r["ReduceL2"] = {reduce_l2_grad};
  r["ReduceSumSquare"] = {reduce_sum_square_grad};
  r["ReduceLogSum"] = {reduce_log_sum_grad};
  r["ReduceLogSumExp"] = {reduce_log_sum_exp_grad};
  r["Trilu"] = {trilu_grad};
  r["Resize"] = {resize_grad};
  r["GridSample"] = {grid_sample_grad};
  r["Tile"] = {tile_grad};
  r["CumSum"] = {cum_sum_grad};
  for (const char* op : {"Shape", "Size", "Constant", "ConstantOfShape", "Range", "ArgMax",
                         "ArgMin", "Hardmax", "EyeLike", "OneHot"})
    r[op] = {nullptr};
}

}  // namespace pipetrain::autodiff
