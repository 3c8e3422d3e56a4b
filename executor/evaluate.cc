#include "executor/evaluate.h"

#include <cmath>
#include <cstring>

#include "executor/forward_runner.h"
#include "ir/error.h"

namespace pipetrain::exec {

namespace {

/// log-sum-exp cross-entropy and argmax hit of one distribution: `classes`
/// logits `stride` floats apart.
void score(const float* logits, int64_t classes, int64_t stride, int64_t label, double* loss,
           int64_t* hits) {
  float m = logits[0];
  int64_t arg = 0;
  for (int64_t c = 1; c < classes; ++c)
    if (logits[c * stride] > m) m = logits[(arg = c) * stride];
  double s = 0;
  for (int64_t c = 0; c < classes; ++c) s += std::exp(static_cast<double>(logits[c * stride] - m));
  *loss += std::log(s) + m - logits[label * stride];
  *hits += arg == label;
}

}  // namespace

EvalResult evaluate(const ir::Graph& model, Backend& backend,
                    const std::vector<std::string>& inputs, const std::string& prediction,
                    const data::Dataset& test, const EvalSpec& spec,
                    const std::function<void(int64_t done, int64_t total)>& progress) {
  if (inputs.empty()) throw ModelError("evaluate: the model takes no inputs");
  const ir::TensorDesc& pred = model.tensor(prediction);
  const int64_t batch = model.tensor(inputs[0]).shape.at(0);
  for (const auto& in : inputs) {
    const ir::TensorDesc& d = model.tensor(in);
    auto it = test.inputs.find(in);
    if (it == test.inputs.end())
      throw ModelError("dataset '" + test.name + "' has no array for input '" + in + "'");
    if (ir::Shape(it->second.shape().begin() + 1, it->second.shape().end()) !=
            ir::Shape(d.shape.begin() + 1, d.shape.end()) ||
        it->second.dtype() != d.dtype)
      throw ModelError("dataset '" + test.name + "' array " + ir::dtype_name(it->second.dtype()) +
                       " " + ir::shape_str(it->second.shape()) + " does not fit input '" + in +
                       "' " + ir::dtype_name(d.dtype) + " " + ir::shape_str(d.shape));
  }
  const int64_t n = test.size();
  // Prediction per sample: (outer, classes, inner) around the class axis.
  const auto axis = static_cast<size_t>(spec.class_axis);
  const int64_t classes = spec.classification ? pred.shape.at(axis) : 1;
  int64_t inner = 1;
  for (size_t k = axis + 1; k < pred.shape.size(); ++k) inner *= pred.shape[k];
  const int64_t per_sample = ir::numel(pred.shape) / batch;
  const int64_t outer = per_sample / (classes * inner);
  const int64_t labels_per_sample = test.labels.numel() / std::max<int64_t>(n, 1);
  if (spec.classification && labels_per_sample != outer * inner)
    throw ModelError("dataset '" + test.name + "' has " + std::to_string(labels_per_sample) +
                     " labels per sample but '" + prediction + "' " + ir::shape_str(pred.shape) +
                     " scores " + std::to_string(outer * inner));

  ForwardRunner runner(model, backend, /*plan_memory=*/true);  // one arena for every batch
  RunOptions run;  // the params may have changed in place since any earlier run
  run.values_version = fresh_values_version();
  EvalResult r;
  int64_t hits = 0;
  for (int64_t start = 0; start < n; start += batch) {
    const int64_t count = std::min(batch, n - start);
    std::map<std::string, ir::Tensor> feeds;
    for (const auto& in : inputs) {
      const ir::Tensor& src = test.inputs.at(in);
      ir::Tensor x(src.dtype(), model.tensor(in).shape);  // zero padding past `count`
      const size_t row = src.nbytes() / static_cast<size_t>(n);
      std::memcpy(x.raw(), static_cast<const char*>(src.raw()) + static_cast<size_t>(start) * row,
                  static_cast<size_t>(count) * row);
      feeds[in] = x;
    }
    ir::Tensor y = runner.run(feeds, run).at(prediction);
    const float* yp = y.data<float>();  // (batch, per_sample)
    for (int64_t i = 0; i < count; ++i) {
      const float* row = yp + i * per_sample;
      if (spec.classification) {
        // Labels of sample i: (outer, inner) in order.
        const int64_t* label = test.labels.data<int64_t>() + (start + i) * outer * inner;
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t k = 0; k < inner; ++k) {
            const int64_t t = label[o * inner + k];
            if (t == spec.ignore_index) continue;
            score(row + o * classes * inner + k, classes, inner, t, &r.loss, &hits);
            ++r.scored;
          }
      } else {
        const float* t = test.labels.data<float>() + (start + i) * per_sample;
        for (int64_t j = 0; j < per_sample; ++j)
          r.loss += (row[j] - t[j]) * (row[j] - t[j]) / static_cast<double>(per_sample);
        ++r.scored;
      }
    }
    if (progress) progress(start + count, n);
  }
  r.samples = n;
  r.has_accuracy = spec.classification;
  if (r.scored > 0) {
    r.loss /= static_cast<double>(r.scored);
    r.accuracy = static_cast<double>(hits) / static_cast<double>(r.scored);
  }
  return r;
}

}  // namespace pipetrain::exec
