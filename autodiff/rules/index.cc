// Gradients of Concat, Split, Slice, Gather, Pad, GatherElements, ScatterElements,
// GatherND, ScatterND and TopK.
#include "autodiff/grad_builder.h"
#include "ir/ops/data_movement.h"

namespace pipetrain::autodiff {

namespace {

using ir::Attribute;

int64_t norm_axis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

// dY split back into the pieces along the axis.
void concat_grad(GradBuilder& b) {
  const size_t n_in = b.node().inputs.size();
  const int64_t axis = norm_axis(b.node().attr_int("axis", 0), b.shape(b.O(0)).size());
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < n_in; ++i) sizes.push_back(b.shape(b.I(i))[static_cast<size_t>(axis)]);
  // Every piece is produced (Split's kernel sizes its outputs from them); unwanted ones go unused.
  auto outs = b.emit("Split", {b.GO(0), b.ints(sizes)}, n_in, {{"axis", Attribute(axis)}});
  for (size_t i = 0; i < n_in; ++i)
    if (b.wants(i)) b.set_GI(i, outs[i]);
}

// The pieces' gradients concatenated; a piece nobody used contributes zeros.
void split_grad(GradBuilder& b) {
  const int64_t axis = norm_axis(b.node().attr_int("axis", 0), b.shape(b.I(0)).size());
  std::vector<std::string> parts;
  for (size_t k = 0; k < b.node().outputs.size(); ++k) {
    if (b.has_GO(k)) {
      parts.push_back(b.GO(k));
    } else {
      if (!b.node().has_output(k)) b.unsupported("Split with an absent output");
      parts.push_back(b.emit1("ConstantOfShape", {b.ints(b.shape(b.O(k)))}));
    }
  }
  b.set_GI(0, parts.size() == 1 ? parts[0] : b.emit1("Concat", parts, {{"axis", Attribute(axis)}}));
}

std::vector<int64_t> const_ints(GradBuilder& b, size_t i, const char* what) {
  if (!b.has_I(i)) return {};
  const ir::Tensor* v = b.value(b.I(i));
  if (!v) b.unsupported(std::string(what) + " that are not constants");
  return v->to_i64();
}

// dY scattered back into zeros at the sliced positions.
void slice_grad(GradBuilder& b) {
  const ir::Shape x = b.shape(b.I(0));
  ir::SliceSpec spec = ir::resolve_slice(x, const_ints(b, 1, "starts"), const_ints(b, 2, "ends"),
                                         const_ints(b, 3, "axes"), const_ints(b, 4, "steps"));
  b.set_GI(0, b.emit1("SliceGrad", {b.GO(0)},
                      {{"input_shape", Attribute(x)},
                       {"starts", Attribute(spec.start)},
                       {"steps", Attribute(spec.step)}}));
}

// Embedding-style gather: dY scatter-added into the table's shape.
void gather_grad(GradBuilder& b) {
  const ir::Shape x = b.shape(b.I(0));
  const int64_t axis = norm_axis(b.node().attr_int("axis", 0), x.size());
  b.set_GI(0, b.emit1("GatherGrad", {b.GO(0), b.I(1)},
                      {{"axis", Attribute(axis)}, {"data_shape", Attribute(x)}}));
}

// Constant padding: dY with the padding sliced off. Reflect, edge and wrap
// read out[i0, i1, ...] = x[m0(i0), m1(i1), ...], a Gather per padded axis
// with the index map m_a; the gradient undoes them last axis first, each a
// GatherGrad (scatter-add) with the same map.
void pad_grad(GradBuilder& b) {
  const ir::Shape x = b.shape(b.I(0));
  ir::PadMode mode = ir::pad_mode_from_string(b.node().attr_string("mode", "constant"));
  ir::PadSpec spec = ir::resolve_pads(x, const_ints(b, 1, "pads"), const_ints(b, 3, "axes"), mode);
  if (mode != ir::PadMode::kConstant) {
    ir::Shape data = b.shape(b.O(0));  // the shape before undoing axis a
    std::string g = b.GO(0);
    for (size_t a = x.size(); a-- > 0;) {
      if (spec.begin[a] == 0 && spec.end[a] == 0) continue;
      std::vector<int64_t> map(static_cast<size_t>(data[a]));
      for (int64_t i = 0; i < data[a]; ++i)
        map[static_cast<size_t>(i)] = ir::pad_source_index(i - spec.begin[a], x[a], mode);
      data[a] = x[a];
      g = b.emit1("GatherGrad", {g, b.ints(map)},
                  {{"axis", Attribute(static_cast<int64_t>(a))}, {"data_shape", Attribute(data)}});
    }
    b.set_GI(0, g);
    return;
  }
  std::vector<int64_t> starts, ends;
  for (size_t a = 0; a < x.size(); ++a) {
    if (spec.begin[a] < 0 || spec.end[a] < 0) b.unsupported("Pad with negative pads (cropping)");
    starts.push_back(spec.begin[a]);
    ends.push_back(spec.begin[a] + x[a]);
  }
  b.set_GI(0, b.emit1("Slice", {b.GO(0), b.ints(starts), b.ints(ends)}));
}

// GatherElements: dX = zeros with dY added at the gathered places.
void gather_elements_grad(GradBuilder& b) {
  const std::string zeros = b.emit1("ConstantOfShape", {b.ints(b.shape(b.I(0)))});
  b.set_GI(0, b.emit1("ScatterElements", {zeros, b.I(1), b.GO(0)},
                      {{"axis", Attribute(b.node().attr_int("axis", 0))},
                       {"reduction", Attribute(std::string("add"))}}));
}

// ScatterElements (none or add): dUpdates = dY gathered at the targets;
// dData = dY, zeroed where `none` overwrote it. With `none` and repeated
// targets the overwritten updates still get dY (as PyTorch's scatter).
void scatter_elements_grad(GradBuilder& b) {
  const std::string r = b.node().attr_string("reduction", "none");
  if (r != "none" && r != "add") b.unsupported("ScatterElements with reduction '" + r + "'");
  const Attribute axis(b.node().attr_int("axis", 0));
  if (b.wants(2)) b.set_GI(2, b.emit1("GatherElements", {b.GO(0), b.I(1)}, {{"axis", axis}}));
  if (b.wants(0)) {
    if (r == "add") {
      b.set_GI(0, b.GO(0));
    } else {
      const std::string zeros = b.emit1("ConstantOfShape", {b.ints(b.shape(b.I(1)))});
      b.set_GI(0, b.emit1("ScatterElements", {b.GO(0), b.I(1), zeros}, {{"axis", axis}}));
    }
  }
}

// GatherND: dData = zeros with dY added at the addressed slices.
void gather_nd_grad(GradBuilder& b) {
  if (b.node().attr_int("batch_dims", 0) != 0) b.unsupported("GatherND with batch_dims");
  const std::string zeros = b.emit1("ConstantOfShape", {b.ints(b.shape(b.I(0)))});
  b.set_GI(0, b.emit1("ScatterND", {zeros, b.I(1), b.GO(0)},
                      {{"reduction", Attribute(std::string("add"))}}));
}

// ScatterND (none or add): dUpdates = dY's addressed slices; dData = dY,
// zeroed where `none` overwrote it.
void scatter_nd_grad(GradBuilder& b) {
  const std::string r = b.node().attr_string("reduction", "none");
  if (r != "none" && r != "add") b.unsupported("ScatterND with reduction '" + r + "'");
  if (b.wants(2)) b.set_GI(2, b.emit1("GatherND", {b.GO(0), b.I(1)}));
  if (b.wants(0)) {
    if (r == "add") {
      b.set_GI(0, b.GO(0));
    } else {
      const std::string zeros = b.emit1("ConstantOfShape", {b.ints(b.shape(b.I(2)))});
      b.set_GI(0, b.emit1("ScatterND", {b.GO(0), b.I(1), zeros}));
    }
  }
}

// TopK: dX = zeros with dValues put back at the chosen indices.
void top_k_grad(GradBuilder& b) {
  if (!b.has_GO(0)) return;
  const std::string indices = b.ensure_output(1, "indices");
  const std::string zeros = b.emit1("ConstantOfShape", {b.ints(b.shape(b.I(0)))});
  b.set_GI(0, b.emit1("ScatterElements", {zeros, indices, b.GO(0)},
                      {{"axis", Attribute(b.node().attr_int("axis", -1))},
                       {"reduction", Attribute(std::string("add"))}}));
}

}  // namespace

void register_index_rules(std::map<std::string, RuleEntry>& r) {
  r["Concat"] = {concat_grad};
  r["Split"] = {split_grad};
  r["Slice"] = {slice_grad};
  r["Gather"] = {gather_grad};
  r["Pad"] = {pad_grad};
  r["GatherElements"] = {gather_elements_grad};
  r["ScatterElements"] = {scatter_elements_grad};
  r["TopK"] = {top_k_grad};
  r["GatherND"] = {gather_nd_grad};
  r["ScatterND"] = {scatter_nd_grad};
}

}  // namespace pipetrain::autodiff
