// Seeded synthetic datasets for tests, demos and benchmarks.
#pragma once

#include <string>

#include "data/dataset.h"

namespace pipetrain::data {

/// kind "blobs": synthetic_classes Gaussian blobs (std synthetic_noise) around centres drawn
///   uniformly in [-5, 5]^synthetic_features; i64 labels, sample i in class i % classes.
/// kind "regression": x ~ N(0, 1)^features, y = x.w + b + noise * N(0, 1) with w, b ~ N(0, 1);
///   (N, 1) f32 targets.
/// kind "spirals": synthetic_classes interleaved 2-D spiral arms (features is always 2).
/// Everything is drawn from std::mt19937_64(options.seed). Throws ModelError on an unknown kind
/// or bad sizes.
Dataset make_synthetic(const std::string& kind, const DataOptions& options);

}  // namespace pipetrain::data
