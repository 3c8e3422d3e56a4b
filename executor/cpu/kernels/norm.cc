// BatchNormalization and LayerNormalization (f32). Statistics accumulate in
// double, in a fixed order: interleaved lanes per row (per sample's plane for
// BatchNorm), so the loops vectorise and the device kernels match.
#include <cmath>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/blocked_layout.h"
#include "executor/cpu/kernels/channel_pieces.h"
#include "executor/cpu/kernels/ew_common.h"
#include "executor/device/elementwise_math.h"

namespace pipetrain::exec::cpu {

namespace {

struct BatchNormArgs {
  const float *x, *scale, *bias, *in_mean, *in_var;
  float* y;
  float* run_mean;   // null without
  float* run_var;    // null without
  const float* res;  // the fused residual (input 5), null without
  float eps, momentum;
  bool training, relu;  // relu: the fused ReLU (activation "Relu")
  int64_t n_batch;
  ChannelLayout xl, yl, rl;
};

BatchNormArgs batch_norm_args(KernelContext& ctx) {
  BatchNormArgs a;
  const ir::Tensor& x = ctx.in(0);  // (N, C, D...)
  a.x = x.data<float>();
  a.scale = ctx.in(1).data<float>();    // (C)
  a.bias = ctx.in(2).data<float>();     // (C)
  a.in_mean = ctx.in(3).data<float>();  // (C)
  a.in_var = ctx.in(4).data<float>();   // (C)
  a.y = ctx.out(0).data<float>();       // (N, C, D...)
  a.run_mean = ctx.has_out(1) ? ctx.out(1).data<float>() : nullptr;
  a.run_var = ctx.has_out(2) ? ctx.out(2).data<float>() : nullptr;
  a.eps = ctx.n().attr_float("epsilon", 1e-5f);
  a.momentum = ctx.n().attr_float("momentum", 0.9f);
  a.training = ctx.n().attr_int("training_mode", 0) != 0;
  a.relu = ctx.n().attr_string("activation", "") == "Relu";
  a.res = ctx.has_in(5) ? ctx.in(5).data<float>() : nullptr;
  a.n_batch = x.shape()[0];
  const int64_t channels = x.shape()[1];
  const int64_t size = a.n_batch * channels == 0 ? 0 : x.numel() / (a.n_batch * channels);
  a.xl = a.yl = a.rl = {channels, size, 0};
  if (ctx.in_blocked(0)) a.xl.block = channel_block(channels);
  if (ctx.out_blocked(0)) a.yl.block = channel_block(channels);
  if (a.res && ctx.in_blocked(5)) a.rl.block = channel_block(channels);
  return a;
}

// What Y's element becomes once normalised: + the fused residual's element
// at the same offset of its own plane (kRes: R laid out as Y), then the fused
// ReLU (kRelu), in the unfused Add's and Relu's order and arithmetic, in
// registers rather than another pass over Y.
template <bool kRes, bool kRelu>
struct Finish {
  float operator()(float v, const float* r, int64_t k) const {
    if constexpr (kRes) v += r[k];
    if constexpr (kRelu) v = device::ReluFn{}(v);
    return v;
  }
};

// Finish's work as a pass over Y's channels [c0, c0 + w) of sample n, for a
// residual laid out unlike Y: the piece lies inside one block of each.
void add_relu_across_layouts(const BatchNormArgs& a, int64_t n, int64_t c0, int64_t w) {
  float* y = a.y + a.yl.plane(n, c0);
  const float* r = a.res + a.rl.plane(n, c0);
  const int64_t ys = a.yl.step(), yc = a.yl.channel_step();
  const int64_t rs = a.rl.step(), rc = a.rl.channel_step();
  for (int64_t i = 0; i < a.yl.size; ++i)
    for (int64_t j = 0; j < w; ++j) {
      float& v = y[i * ys + j * yc];
      v += r[i * rs + j * rc];
      if (a.relu) v = device::ReluFn{}(v);
    }
}

// Channel c's running statistics from the batch's.
void update_running(const BatchNormArgs& a, int64_t c, double mean, double var) {
  if (a.run_mean)
    a.run_mean[c] = static_cast<float>(a.in_mean[c] * a.momentum + mean * (1.0 - a.momentum));
  if (a.run_var)
    a.run_var[c] = static_cast<float>(a.in_var[c] * a.momentum + var * (1.0 - a.momentum));
}

// y = (x - mean) a + B with a = scale / sqrt(var + eps): centred first, as
// x a + (B - mean a) would cancel where the mean is large against the spread.
struct ChannelAffine {
  float m, a, b;
  float operator()(float x) const { return (x - m) * a + b; }
};
ChannelAffine channel_affine(const BatchNormArgs& a, int64_t c, double mean, double var) {
  return {static_cast<float>(mean), static_cast<float>(a.scale[c] / std::sqrt(var + a.eps)),
          a.bias[c]};
}

template <typename Out>
void batch_norm_plain(const BatchNormArgs& a) {
  const Out out;
  const int64_t n_batch = a.n_batch, channels = a.xl.channels, size = a.xl.size;
  const float* xd = a.x;
  // Channels are independent: split over threads, each summed in its own order.
  parallel_for(
      channels, n_batch * channels * size * 3,
      [&](int64_t c_begin, int64_t c_end) {
        for (int64_t c = c_begin; c < c_end; ++c) {
          double mean = a.in_mean[c], var = a.in_var[c];
          if (a.training) {
            // Batch statistics over (N, D...): two passes, biased variance; per
            // sample's plane a sum in lanes, planes in order (the device kernels'
            // two-level order, device/ops_norm.h).
            double sum = 0, sq = 0;
            for (int64_t n = 0; n < n_batch; ++n)
              sum += sum_row(xd + (n * channels + c) * size, size);
            double count = static_cast<double>(n_batch * size);
            mean = count > 0 ? sum / count : 0.0;
            for (int64_t n = 0; n < n_batch; ++n)
              sq += device::sum_sq_dev_row(xd + (n * channels + c) * size, size, mean);
            var = count > 0 ? sq / count : 0.0;
            update_running(a, c, mean, var);
          }
          const ChannelAffine f = channel_affine(a, c, mean, var);
          for (int64_t n = 0; n < n_batch; ++n) {
            const float* p = xd + (n * channels + c) * size;
            float* q = a.y + (n * channels + c) * size;
            const float* r = a.res ? a.res + a.rl.plane(n, c) : nullptr;
            for (int64_t i = 0; i < size; ++i) q[i] = out(f(p[i]), r, i);
          }
        }
      },
      1);
}

// batch_norm_plain where X or Y is blocked: per piece of channels of one
// block (channel_pieces.h), the same sums in the same order and the same
// formulas, so the same bits. kBoth: X and Y blocked (channels contiguous, a
// stride the vectoriser sees).
template <bool kBoth, typename Out>
void batch_norm_pieces(const BatchNormArgs& a) {
  const Out out;
  const ChannelLayout& xl = a.xl;
  const int64_t size = xl.size, xs = xl.step(), xc = kBoth ? 1 : xl.channel_step();
  const int64_t ys = a.yl.step(), yc = kBoth ? 1 : a.yl.channel_step();
  const std::vector<ChannelPiece> pieces =
      channel_pieces(xl.channels, xl.block ? xl.block : a.yl.block);
  parallel_for(
      static_cast<int64_t>(pieces.size()), a.n_batch * xl.channels * size * 3,
      [&](int64_t p_begin, int64_t p_end) {
        for (int64_t p = p_begin; p < p_end; ++p) {
          const int64_t c0 = pieces[p].c0, w = pieces[p].w;
          double mean[kPiece], var[kPiece];
          for (int64_t j = 0; j < w; ++j) mean[j] = a.in_mean[c0 + j], var[j] = a.in_var[c0 + j];
          if (a.training) {
            double sum[kPiece] = {}, sq[kPiece] = {};
            double* sums[] = {sum};
            double* sqs[] = {sq};
            for (int64_t n = 0; n < a.n_batch; ++n) {
              const float* xp = a.x + xl.plane(n, c0);
              add_plane_sums<1>(
                  size, w, [&](int64_t i, int64_t j, double* t) { t[0] = xp[i * xs + j * xc]; },
                  sums);
            }
            const double count = static_cast<double>(a.n_batch * size);
            for (int64_t j = 0; j < w; ++j) mean[j] = count > 0 ? sum[j] / count : 0.0;
            for (int64_t n = 0; n < a.n_batch; ++n) {
              const float* xp = a.x + xl.plane(n, c0);
              add_plane_sums<1>(
                  size, w,
                  [&](int64_t i, int64_t j, double* t) {
                    const double d = xp[i * xs + j * xc] - mean[j];
                    t[0] = d * d;
                  },
                  sqs);
            }
            for (int64_t j = 0; j < w; ++j) {
              var[j] = count > 0 ? sq[j] / count : 0.0;
              update_running(a, c0 + j, mean[j], var[j]);
            }
          }
          ChannelAffine f[kPiece];
          for (int64_t j = 0; j < w; ++j) f[j] = channel_affine(a, c0 + j, mean[j], var[j]);
          for (int64_t n = 0; n < a.n_batch; ++n) {
            const float* xp = a.x + xl.plane(n, c0);
            float* yp = a.y + a.yl.plane(n, c0);
            const float* rp = a.res ? a.res + a.rl.plane(n, c0) : nullptr;
            for (int64_t i = 0; i < size; ++i)
              for (int64_t j = 0; j < w; ++j)
                yp[i * ys + j * yc] = out(f[j](xp[i * xs + j * xc]), rp, i * ys + j * yc);
          }
        }
      },
      1);
}

template <typename Out>
void batch_norm_as(const BatchNormArgs& a) {
  if (a.xl.block && a.yl.block)
    batch_norm_pieces<true, Out>(a);
  else if (a.xl.block || a.yl.block)
    batch_norm_pieces<false, Out>(a);
  else
    batch_norm_plain<Out>(a);
}

void batch_norm(KernelContext& ctx) {
  const BatchNormArgs a = batch_norm_args(ctx);
  if (a.res && a.rl.block != a.yl.block) {
    // The residual in another layout than Y (one of them row-major): added
    // and clipped per piece inside the blocked one's blocks.
    batch_norm_as<Finish<false, false>>(a);
    const std::vector<ChannelPiece> pieces =
        channel_pieces(a.yl.channels, a.yl.block ? a.yl.block : a.rl.block);
    parallel_for(static_cast<int64_t>(pieces.size()), a.n_batch * a.yl.channels * a.yl.size,
                 [&](int64_t p_begin, int64_t p_end) {
                   for (int64_t p = p_begin; p < p_end; ++p)
                     for (int64_t n = 0; n < a.n_batch; ++n)
                       add_relu_across_layouts(a, n, pieces[p].c0, pieces[p].w);
                 });
  } else if (a.res) {
    a.relu ? batch_norm_as<Finish<true, true>>(a) : batch_norm_as<Finish<true, false>>(a);
  } else {
    a.relu ? batch_norm_as<Finish<false, true>>(a) : batch_norm_as<Finish<false, false>>(a);
  }
}

// Expands a parameter broadcastable to the normalised shape `norm` into a
// dense (numel(norm)) vector.
std::vector<float> expand_param(const ir::Tensor& p, const ir::Shape& norm) {
  const ir::Shape& ps = p.shape();
  size_t rank = norm.size();
  std::vector<int64_t> pstride(rank, 0);
  int64_t acc = 1;
  for (size_t j = ps.size(); j-- > 0;) {
    size_t i = rank - ps.size() + j;  // aligned right; leading axes of p beyond norm are 1
    if (i < rank && ps[j] != 1) pstride[i] = acc;
    acc *= ps[j];
  }
  std::vector<float> out(static_cast<size_t>(ir::numel(norm)));
  std::vector<int64_t> idx(rank, 0);
  const float* d = p.data<float>();
  for (size_t t = 0; t < out.size(); ++t) {
    int64_t off = 0;
    for (size_t i = 0; i < rank; ++i) off += idx[i] * pstride[i];
    out[t] = d[off];
    for (size_t i = rank; i-- > 0;) {
      if (++idx[i] < norm[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

using device::sum_sq_dev_row;

void layer_norm(KernelContext& ctx) {
  const ir::Tensor& x = ctx.in(0);  // (outer..., inner...)
  const ir::Shape& xs = x.shape();
  int64_t rank = x.rank();
  int64_t axis = ctx.n().attr_int("axis", -1);
  if (axis < 0) axis += rank;
  const float eps = ctx.n().attr_float("epsilon", 1e-5f);
  ir::Shape norm(xs.begin() + axis, xs.end());
  const int64_t inner = ir::numel(norm);
  const int64_t outer = inner == 0 ? 0 : x.numel() / inner;
  std::vector<float> scale = expand_param(ctx.in(1), norm);  // (inner)
  std::vector<float> bias = ctx.has_in(2) ? expand_param(ctx.in(2), norm)
                                          : std::vector<float>(static_cast<size_t>(inner), 0.0f);
  float* mean_out = ctx.has_out(1) ? ctx.out(1).data<float>() : nullptr;  // (outer)
  float* inv_out = ctx.has_out(2) ? ctx.out(2).data<float>() : nullptr;   // (outer)
  float* y = ctx.out(0).data<float>();
  parallel_for(
      outer, outer * inner * 3,
      [&](int64_t r_begin, int64_t r_end) {
        for (int64_t r = r_begin; r < r_end; ++r) {
          const float* p = x.data<float>() + r * inner;
          float* q = y + r * inner;
          // Lane-interleaved sums (ew_common.h): a fixed order that vectorises.
          const double mean = sum_row(p, inner) / static_cast<double>(inner);
          const double sq = sum_sq_dev_row(p, inner, mean);
          const double inv = 1.0 / std::sqrt(sq / static_cast<double>(inner) + eps);
          for (int64_t i = 0; i < inner; ++i)
            q[i] = static_cast<float>((p[i] - mean) * inv) * scale[static_cast<size_t>(i)] +
                   bias[static_cast<size_t>(i)];
          if (mean_out) mean_out[r] = static_cast<float>(mean);
          if (inv_out) inv_out[r] = static_cast<float>(inv);
        }
      },
      1);
}

}  // namespace

CpuKernel kernel_BatchNormalization() {
  return {batch_norm, {ir::DType::kF32}, 0};
}
CpuKernel kernel_LayerNormalization() {
  return {layer_norm, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
