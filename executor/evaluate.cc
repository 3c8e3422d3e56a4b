#include "executor/evaluate.h"

#include <cmath>
#include <cstring>

#include "executor/forward_runner.h"
#include "ir/error.h"

namespace pipetrain::exec {

namespace {

/// log-sum-exp cross-entropy and argmax hit of one row of logits (C).
void score_row(const float* logits, int64_t classes, int64_t label, double* loss, int64_t* hits) {
  float m = logits[0];
  int64_t arg = 0;
  for (int64_t c = 1; c < classes; ++c)
    if (logits[c] > m) m = logits[arg = c];
  double s = 0;
  for (int64_t c = 0; c < classes; ++c) s += std::exp(static_cast<double>(logits[c] - m));
  *loss += std::log(s) + m - logits[label];
  *hits += arg == label;
}

}  // namespace

EvalResult evaluate(const ir::Graph& model, Backend& backend, const std::string& input,
                    const std::string& prediction, const data::Dataset& test) {
  const ir::TensorDesc& in = model.tensor(input);
  const ir::TensorDesc& pred = model.tensor(prediction);
  const int64_t batch = in.shape.at(0);
  ir::Shape sample(test.features.shape().begin() + 1, test.features.shape().end());
  ir::Shape want(in.shape.begin() + 1, in.shape.end());
  if (sample != want)
    throw ModelError("dataset '" + test.name + "' has samples of shape " + ir::shape_str(sample) +
                     " but input '" + input + "' takes " + ir::shape_str(want));
  const int64_t n = test.size();
  const size_t sample_bytes = static_cast<size_t>(ir::numel(sample)) * sizeof(float);
  const int64_t per_sample = ir::numel(pred.shape) / batch;  // prediction elements per sample
  ForwardRunner runner(model, backend);
  RunOptions run;  // the params may have changed in place since any earlier run
  run.values_version = fresh_values_version();
  EvalResult r;
  int64_t hits = 0;
  for (int64_t start = 0; start < n; start += batch) {
    const int64_t count = std::min(batch, n - start);
    ir::Tensor x(ir::DType::kF32, in.shape);  // zero padding past `count`
    std::memcpy(x.raw(), test.features.data<float>() + start * ir::numel(sample),
                static_cast<size_t>(count) * sample_bytes);
    ir::Tensor y = runner.run({{input, x}}, run).at(prediction);
    const float* yp = y.data<float>();  // (batch, per_sample)
    for (int64_t i = 0; i < count; ++i) {
      const float* row = yp + i * per_sample;
      if (test.is_classification()) {
        const int64_t label = test.labels.data<int64_t>()[start + i];
        score_row(row, per_sample, label, &r.loss, &hits);
      } else {
        const float* t = test.labels.data<float>() + (start + i) * per_sample;
        for (int64_t j = 0; j < per_sample; ++j)
          r.loss += (row[j] - t[j]) * (row[j] - t[j]) / static_cast<double>(per_sample);
      }
    }
  }
  r.samples = n;
  r.has_accuracy = test.is_classification();
  if (n > 0) {
    r.loss /= static_cast<double>(n);
    r.accuracy = static_cast<double>(hits) / static_cast<double>(n);
  }
  return r;
}

}  // namespace pipetrain::exec
