#include "data/synthetic.h"

#include <cmath>
#include <random>

#include "data/random.h"
#include "ir/error.h"

namespace pipetrain::data {

Dataset make_synthetic(const std::string& kind, const DataOptions& o) {
  const std::string what = "synthetic:" + kind;
  if (o.synthetic_samples <= 0 || o.synthetic_features <= 0)
    throw ModelError(what + ": synthetic_samples and synthetic_features must be positive");
  if (kind != "regression" && o.synthetic_classes < 2)
    throw ModelError(what + ": synthetic_classes must be at least 2");
  std::mt19937_64 rng(o.seed);
  const int64_t n = o.synthetic_samples, c = o.synthetic_classes;
  const int64_t f = kind == "spirals" ? 2 : o.synthetic_features;
  Dataset ds;
  ds.name = what;
  ds.features = ir::Tensor(ir::DType::kF32, {n, f});
  float* x = ds.features.data<float>();  // (N, F)

  if (kind == "blobs" || kind == "spirals") {
    ds.labels = ir::Tensor(ir::DType::kI64, {n});
    ds.num_classes = c;
    int64_t* y = ds.labels.data<int64_t>();                   // (N)
    std::vector<double> centres(static_cast<size_t>(c * f));  // (C, F)
    for (auto& v : centres) v = -5.0 + 10.0 * uniform01(rng);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = i % c;
      y[i] = k;
      if (kind == "blobs") {
        for (int64_t j = 0; j < f; ++j)
          x[i * f + j] =
              static_cast<float>(centres[k * f + j] + o.synthetic_noise * standard_normal(rng));
      } else {
        // Arm k: radius t in [0, 1), angle 2 pi k / C + 4 t (plus noise), one and a bit turns.
        const double t = static_cast<double>(i / c) / static_cast<double>((n + c - 1) / c);
        const double a = 2.0 * M_PI * static_cast<double>(k) / static_cast<double>(c) + 4.0 * t +
                         0.2 * o.synthetic_noise * standard_normal(rng);
        x[i * f] = static_cast<float>(t * std::sin(a));
        x[i * f + 1] = static_cast<float>(t * std::cos(a));
      }
    }
    return ds;
  }
  if (kind == "regression") {
    ds.labels = ir::Tensor(ir::DType::kF32, {n, 1});
    float* y = ds.labels.data<float>();  // (N, 1)
    std::vector<double> w(static_cast<size_t>(f));
    for (auto& v : w) v = standard_normal(rng);
    const double b = standard_normal(rng);
    for (int64_t i = 0; i < n; ++i) {
      double dot = b;
      for (int64_t j = 0; j < f; ++j) {
        const double v = standard_normal(rng);
        x[i * f + j] = static_cast<float>(v);
        dot += w[j] * v;
      }
      y[i] = static_cast<float>(dot + o.synthetic_noise * standard_normal(rng));
    }
    return ds;
  }
  throw ModelError(what + ": unknown synthetic dataset (blobs, regression, spirals)");
}

}  // namespace pipetrain::data
