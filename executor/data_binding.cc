#include "executor/data_binding.h"

#include <algorithm>
#include <deque>
#include <set>

#include "ir/error.h"

namespace pipetrain::exec {

namespace {

ir::Shape sample_shape(const ir::Shape& s) {
  return ir::Shape(s.begin() + 1, s.end());
}

// `t` in the dtype `want` when that loses nothing a model could mean:
// integers and bools to float, bools to integers, integers to i32/bool when
// they fit. A float array never becomes integer ids.
ir::Tensor convert(const ir::Tensor& t, ir::DType want, const std::string& what) {
  if (t.dtype() == want) return t;
  auto refuse = [&] {
    return ModelError(what + " is " + ir::dtype_name(t.dtype()) + " but the model takes " +
                      ir::dtype_name(want));
  };
  if (ir::is_float(t.dtype())) throw refuse();
  ir::Tensor out(want, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.at(i);
    switch (want) {
      case ir::DType::kF32: out.data<float>()[i] = static_cast<float>(v); break;
      case ir::DType::kI64: out.data<int64_t>()[i] = static_cast<int64_t>(v); break;
      case ir::DType::kI32:
        if (v < -2147483648.0 || v > 2147483647.0) throw refuse();
        out.data<int32_t>()[i] = static_cast<int32_t>(v);
        break;
      case ir::DType::kBool:
        if (v != 0 && v != 1) throw refuse();
        out.data<bool>()[i] = v != 0;
        break;
      default: throw refuse();
    }
  }
  return out;
}

// ModelError at the first id outside [0, bound) (`ignore` allowed when set).
// `ds` maps the sample to the source's row, the one the user can find.
void check_ids(const data::Dataset& ds, const ir::Tensor& t, int64_t bound, const std::string& what,
               const std::string& range_name, const int64_t* ignore = nullptr) {
  if (bound <= 0 || ir::is_float(t.dtype())) return;
  const int64_t per = t.shape()[0] > 0 ? t.numel() / t.shape()[0] : 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const auto id = static_cast<int64_t>(t.at(i));
    if ((id >= 0 && id < bound) || (ignore && id == *ignore)) continue;
    throw ModelError(what + ": id " + std::to_string(id) + " (sample " +
                     std::to_string(ds.source_row(i / per)) +
                     (per > 1 ? ", position " + std::to_string(i % per) : std::string()) +
                     ") is outside " + range_name + " [0, " + std::to_string(bound) + ")");
  }
}

}  // namespace

int64_t id_bound(const ir::Graph& g, const std::string& input) {
  // Follow the ids through ops that only move or relabel them.
  static const std::set<std::string> kPassThrough = {"Reshape", "Unsqueeze", "Squeeze",
                                                     "Flatten", "Cast",      "Identity"};
  int64_t bound = 0;
  std::deque<std::string> todo = {input};
  std::set<std::string> seen;
  while (!todo.empty()) {
    const std::string t = todo.front();
    todo.pop_front();
    if (!seen.insert(t).second) continue;
    for (const auto& n : g.nodes) {
      if (n.backward || n.inputs.empty()) continue;
      if (kPassThrough.count(n.op_type) && n.inputs[0] == t) {
        todo.push_back(n.outputs.at(0));
      } else if (n.op_type == "Gather" && n.inputs.size() > 1 && n.inputs[1] == t &&
                 g.has_value(n.inputs[0])) {
        const ir::Shape& table = g.tensor(n.inputs[0]).shape;
        int64_t axis = n.attr_int("axis", 0);
        if (axis < 0) axis += static_cast<int64_t>(table.size());
        const int64_t rows = table.at(static_cast<size_t>(axis));
        bound = bound == 0 ? rows : std::min(bound, rows);
      }
    }
  }
  return bound;
}

std::string label_input(const autodiff::TrainingGraph& tg, const std::string& labels_key,
                        const data::Dataset& ds) {
  if (!tg.labels.empty()) return tg.labels;
  const auto& ins = tg.graph.inputs;
  if (std::find(ins.begin(), ins.end(), labels_key) != ins.end()) return labels_key;
  // A single-array dataset feeds the first input; the labels take the one left.
  std::vector<std::string> left;
  for (const auto& in : ins)
    if (!ds.inputs.count(in) && in != autodiff::kLossWeight) left.push_back(in);
  if (ds.features.defined() && left.size() == 2) return left[1];
  if (!ds.features.defined() && left.size() == 1) return left[0];
  return "";
}

DataBinding bind_dataset(const ir::Graph& g, const std::string& labels, data::DataSplit& split,
                         const std::string& what, int64_t label_classes, int64_t ignore_index) {
  DataBinding b;
  b.labels = labels;
  // Which array feeds which input: named arrays by name, features the first input left.
  std::vector<std::string> wanted;
  for (const auto& in : g.inputs)
    if (in != labels && in != autodiff::kLossWeight) wanted.push_back(in);  // the runtime feeds it
  std::string features_input;
  for (const auto& in : wanted)
    if (!split.train.inputs.count(in)) {
      features_input = in;
      break;
    }
  for (const auto& [name, t] : split.train.inputs)
    if (std::find(wanted.begin(), wanted.end(), name) == wanted.end()) {
      std::string known;
      for (const auto& in : wanted) known += (known.empty() ? "" : ", ") + in;
      throw ModelError("dataset '" + what + "' has an array '" + name +
                       "' that no model input takes (the model's inputs: " + known + ")");
    }
  for (const auto& in : wanted) {
    const bool named = split.train.inputs.count(in) != 0;
    if (!named && (in != features_input || !split.train.features.defined()))
      throw ModelError("dataset '" + what + "' has no array for the model's input '" + in + "' " +
                       ir::dtype_name(g.tensor(in).dtype) + " " +
                       ir::shape_str(g.tensor(in).shape) + " (name an array '" + in +
                       "' in an .npz or as " + in + ".npy)");
    b.inputs.push_back(in);
  }
  const bool features_used = !features_input.empty() && split.train.features.defined();
  if (split.train.features.defined() && !features_used)
    throw ModelError("dataset '" + what +
                     "' has unnamed features but every model input has a named array");

  for (data::Dataset* ds : {&split.train, &split.test}) {
    if (ds->size() == 0 && ds != &split.train) continue;
    if (features_used && ds->features.defined()) {
      ds->inputs[features_input] = ds->features;
      ds->features = ir::Tensor();
    }
    for (const auto& in : b.inputs) {
      const ir::TensorDesc& d = g.tensor(in);
      auto it = ds->inputs.find(in);
      if (it == ds->inputs.end())
        throw ModelError("dataset '" + ds->name + "' has no array for input '" + in + "'");
      const std::string array = "dataset '" + ds->name + "' array for input '" + in + "'";
      if (sample_shape(it->second.shape()) != sample_shape(d.shape))
        throw ModelError(array + " has samples of shape " +
                         ir::shape_str(sample_shape(it->second.shape())) + " but '" + in +
                         "' takes " + ir::shape_str(sample_shape(d.shape)) + " per sample (" +
                         ir::shape_str(d.shape) + " per batch)");
      it->second = convert(it->second, d.dtype, array);
      check_ids(*ds, it->second, id_bound(g, in), array, "the rows of the embedding it indexes");
    }
    if (!labels.empty()) {
      const ir::TensorDesc& d = g.tensor(labels);
      const std::string array = "dataset '" + ds->name + "' labels";
      ir::Shape want = sample_shape(d.shape);
      ir::Shape have = sample_shape(ds->labels.shape());
      if (have != want) {
        if (ir::numel(have) != ir::numel(want))
          throw ModelError(array + " have shape " + ir::shape_str(have) + " per sample but '" +
                           labels + "' takes " + ir::shape_str(want));
        want.insert(want.begin(), ds->labels.shape()[0]);
        ds->labels = ds->labels.reshaped(want);
      }
      if (ds->labels.dtype() != d.dtype)
        throw ModelError(array + " are " + ir::dtype_name(ds->labels.dtype()) + " but '" + labels +
                         "' takes " + ir::dtype_name(d.dtype) +
                         (d.dtype == ir::DType::kI64 ? " class ids (use --loss mse for regression)"
                                                     : " targets"));
      check_ids(*ds, ds->labels, label_classes, array,
                "the model's " + std::to_string(label_classes) + " classes", &ignore_index);
    }
  }
  return b;
}

std::map<std::string, ir::Tensor> batch_feeds(const DataBinding& binding, const data::Batch& b) {
  std::map<std::string, ir::Tensor> feeds;
  for (const auto& in : binding.inputs) feeds[in] = b.inputs.at(in);
  if (!binding.labels.empty()) feeds[binding.labels] = b.labels;
  return feeds;
}

}  // namespace pipetrain::exec
