// Per-element optimizer updates, written once for every backend: plain inline
// functions over floats that the CPU loops call and CUDA kernels can call too
// (PIPETRAIN_HOST_DEVICE is __host__ __device__ under nvcc).
//
// The math and its rounding follow PyTorch 1.13's single-tensor (foreach=False)
// implementations op by op: every scalar is a float, as ATen casts a Python
// float before a float kernel, and each in-place op rounds once.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define PIPETRAIN_HOST_DEVICE __host__ __device__
#else
#define PIPETRAIN_HOST_DEVICE
#endif

namespace pipetrain::exec::optim {

/// Scalars of one SGD step, computed on the host (in double, then cast).
struct SgdScalars {
  float neg_lr;          // -lr
  float weight_decay;    // L2: d = g + wd * p
  float momentum;        // 0: plain SGD
  float one_minus_damp;  // 1 - dampening
  bool nesterov;
  bool first_step;  // the momentum buffer starts as d (torch: buf is None)
};

/// torch.optim.SGD:
///   d = g + wd * p
///   buf = first ? d : buf * momentum + (1 - dampening) * d
///   d = nesterov ? d + momentum * buf : buf          (when momentum != 0)
///   p = p - lr * d
PIPETRAIN_HOST_DEVICE inline void sgd_update(float& p, float g, float& buf, const SgdScalars& s) {
  float d = g;
  if (s.weight_decay != 0.0f) d = d + s.weight_decay * p;
  if (s.momentum != 0.0f) {
    if (s.first_step) {
      buf = d;
    } else {
      buf = buf * s.momentum;
      buf = buf + s.one_minus_damp * d;
    }
    d = s.nesterov ? d + s.momentum * buf : buf;
  }
  p = p + s.neg_lr * d;
}

/// Scalars of one Adam/AdamW step at step t (1-based), computed on the host in double:
/// bias1 = 1 - beta1^t, bias2 = 1 - beta2^t, step_size = lr / bias1.
struct AdamScalars {
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float neg_step_size;  // -lr / bias1
  float bias2_sqrt;     // sqrt(bias2)
  float eps;
  float l2_decay;          // Adam: g = g + wd * p
  float decoupled_factor;  // AdamW: p = p * (1 - lr * wd) first; 1 for Adam
  bool amsgrad;
};

/// torch.optim.Adam / AdamW:
///   p = p * (1 - lr * wd)                      (AdamW only)
///   g = g + wd * p                             (Adam only)
///   m = m * beta1 + (1 - beta1) * g
///   v = v * beta2 + (1 - beta2) * g * g
///   vmax = max(vmax, v)                        (amsgrad; the denominator then uses vmax)
///   p = p + (-step_size) * m / (sqrt(v) / sqrt(bias2) + eps)
PIPETRAIN_HOST_DEVICE inline void adam_update(float& p, float g, float& m, float& v, float& vmax,
                                              const AdamScalars& s) {
  if (s.decoupled_factor != 1.0f) p = p * s.decoupled_factor;
  if (s.l2_decay != 0.0f) g = g + s.l2_decay * p;
  m = m * s.beta1;
  m = m + s.one_minus_beta1 * g;
  v = v * s.beta2;
  v = v + s.one_minus_beta2 * g * g;
  float second = v;
  if (s.amsgrad) {
    vmax = vmax > v ? vmax : v;  // torch.maximum (NaN aside)
    second = vmax;
  }
  const float denom = sqrtf(second) / s.bias2_sqrt + s.eps;
  p = p + s.neg_step_size * m / denom;
}

}  // namespace pipetrain::exec::optim
