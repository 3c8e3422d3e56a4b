#include "executor/cuda/cudnn_ops.h"

#include <climits>
#include <optional>
#include <string>
#include <vector>

#include "executor/cuda/cudnn_util.h"
#include "executor/device/ops_reduce.h"
#include "ir/ops/window.h"

namespace pipetrain::exec::cuda {

namespace {

constexpr float kOne = 1.0f, kZero = 0.0f;

bool fits_int(int64_t v) {
  return v >= 0 && v <= INT_MAX;
}

// (outer, n, inner, 1): cuDNN's channel mode is a softmax along dim 1.
std::optional<std::vector<int>> softmax_dims(const device::DeviceOpArgs& a) {
  const device::AxisView v = device::axis_view(a.in[0].shape, a.n().attr_int("axis", -1));
  if (!fits_int(v.outer * v.n * v.inner) || v.outer * v.n * v.inner == 0) return std::nullopt;
  return std::vector<int>{static_cast<int>(v.outer), static_cast<int>(v.n),
                          static_cast<int>(v.inner), 1};
}

cudnnSoftmaxAlgorithm_t softmax_algo(bool log) {
  return log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE;  // accurate: the max subtracted first
}

class PoolDesc {
 public:
  PoolDesc() { PIPETRAIN_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d_)); }
  ~PoolDesc() { cudnnDestroyPoolingDescriptor(d_); }
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
  operator cudnnPoolingDescriptor_t() const { return d_; }

 private:
  cudnnPoolingDescriptor_t d_ = nullptr;
};

// A pool's shapes as cuDNN takes them (1-D as 2-D with a unit height).
struct PoolShapes {
  std::vector<int> x, y, window, pads, strides;
  cudnnPoolingMode_t mode{};
};

std::optional<PoolShapes> pool_shapes(const ir::Node& n, const ir::Shape& x) {
  if (x.size() < 3 || x.size() > 5) return std::nullopt;
  const ir::WindowGeometry g =
      ir::window_geometry(n, ir::Shape(x.begin() + 2, x.end()), n.attr_ints("kernel_shape"),
                          n.attr_int("ceil_mode", 0) != 0);
  PoolShapes s;
  const bool max = n.op_type == "MaxPool" || n.op_type == "MaxPoolGrad";
  s.mode = max ? CUDNN_POOLING_MAX_DETERMINISTIC
               : (n.attr_int("count_include_pad", 0) ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                     : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING);
  int64_t x_count = x[0] * x[1], y_count = x[0] * x[1];
  s.x = {static_cast<int>(x[0]), static_cast<int>(x[1])};
  s.y = s.x;
  if (g.rank() == 1) {  // a unit height in front
    s.x.push_back(1);
    s.y.push_back(1);
    s.window.push_back(1);
    s.pads.push_back(0);
    s.strides.push_back(1);
  }
  for (size_t i = 0; i < g.rank(); ++i) {
    // cuDNN pools have symmetric pads and no dilation.
    if (g.pads_begin[i] != g.pads_end[i] || g.pads_begin[i] < 0 || g.dilations[i] != 1)
      return std::nullopt;
    // ... and floor their output size: the IR's must be what that gives.
    if (g.out[i] != (g.in[i] + 2 * g.pads_begin[i] - g.kernel[i]) / g.strides[i] + 1)
      return std::nullopt;
    for (int64_t v : {g.in[i], g.out[i], g.kernel[i], g.pads_begin[i], g.strides[i]})
      if (!fits_int(v)) return std::nullopt;
    s.x.push_back(static_cast<int>(g.in[i]));
    s.y.push_back(static_cast<int>(g.out[i]));
    s.window.push_back(static_cast<int>(g.kernel[i]));
    s.pads.push_back(static_cast<int>(g.pads_begin[i]));
    s.strides.push_back(static_cast<int>(g.strides[i]));
    x_count *= g.in[i];
    y_count *= g.out[i];
  }
  if (!fits_int(x[0]) || !fits_int(x[1]) || !fits_int(x_count) || !fits_int(y_count) ||
      x_count == 0 || y_count == 0)
    return std::nullopt;
  return s;
}

// Fills the descriptor; false when cuDNN's own output size differs from the IR's.
bool describe_pool(const PoolShapes& s, const PoolDesc& pool, const TensorDesc& x) {
  // NaN inputs are skipped, as the CPU's running max skips them.
  PIPETRAIN_CUDNN_CHECK(cudnnSetPoolingNdDescriptor(
      pool, s.mode, CUDNN_NOT_PROPAGATE_NAN, static_cast<int>(s.window.size()), s.window.data(),
      s.pads.data(), s.strides.data()));
  std::vector<int> out(s.y.size());
  PIPETRAIN_CUDNN_CHECK(
      cudnnGetPoolingNdForwardOutputDim(pool, x, static_cast<int>(out.size()), out.data()));
  return out == s.y;
}

}  // namespace

bool cudnn_softmax(CudaExec& ex, cudnnHandle_t h, device::DeviceOpArgs& a, bool log) {
  (void)ex;  // runs on the handle's stream, which is the exec's
  const auto dims = softmax_dims(a);
  if (!dims) return false;
  const TensorDesc t(*dims);
  PIPETRAIN_CUDNN_CHECK(cudnnSoftmaxForward(h, softmax_algo(log), CUDNN_SOFTMAX_MODE_CHANNEL, &kOne,
                                            t, a.in[0].data<float>(), &kZero, t,
                                            a.out[0].data<float>()));
  return true;
}

bool cudnn_softmax_grad(CudaExec& ex, cudnnHandle_t h, device::DeviceOpArgs& a, bool log) {
  (void)ex;
  const auto dims = softmax_dims(a);
  if (!dims) return false;
  const TensorDesc t(*dims);
  // Inputs (dY, Y); cuDNN takes (Y, dY).
  PIPETRAIN_CUDNN_CHECK(cudnnSoftmaxBackward(
      h, softmax_algo(log), CUDNN_SOFTMAX_MODE_CHANNEL, &kOne, t, a.in[1].data<float>(), t,
      a.in[0].data<float>(), &kZero, t, a.out[0].data<float>()));
  return true;
}

bool cudnn_pool(CudaExec& ex, cudnnHandle_t h, device::DeviceOpArgs& a) {
  (void)ex;
  if (a.n().op_type == "MaxPool" && a.has_out(1)) return false;  // Indices: the shared kernel
  const auto s = pool_shapes(a.n(), a.in[0].shape);
  if (!s) return false;
  const TensorDesc x(s->x), y(s->y);
  const PoolDesc pool;
  if (!describe_pool(*s, pool, x)) return false;
  PIPETRAIN_CUDNN_CHECK(cudnnPoolingForward(h, pool, &kOne, x, a.in[0].data<float>(), &kZero, y,
                                            a.out[0].data<float>()));
  return true;
}

bool cudnn_pool_grad(CudaExec& ex, cudnnHandle_t h, device::DeviceOpArgs& a) {
  const bool max = a.n().op_type == "MaxPoolGrad";
  const ir::Shape& x_shape = max ? a.in[1].shape : a.out[0].shape;
  const auto s = pool_shapes(a.n(), x_shape);
  if (!s) return false;
  const TensorDesc x(s->x), y(s->y);
  const PoolDesc pool;
  if (!describe_pool(*s, pool, x)) return false;
  const float* dy = a.in[0].data<float>();
  float* dx = a.out[0].data<float>();
  if (max) {
    // cuDNN finds each window's maximum again from X and the forward's Y.
    const float* xv = a.in[1].data<float>();
    float* yv = ex.scratch<float>(a.in[0].numel());
    PIPETRAIN_CUDNN_CHECK(cudnnPoolingForward(h, pool, &kOne, x, xv, &kZero, y, yv));
    PIPETRAIN_CUDNN_CHECK(cudnnPoolingBackward(h, pool, &kOne, y, yv, y, dy, x, xv, &kZero, x, dx));
  } else {
    // Averages read neither X nor Y: buffers of the right sizes stand in.
    const float* unused_x = ex.scratch<float>(a.out[0].numel());
    PIPETRAIN_CUDNN_CHECK(
        cudnnPoolingBackward(h, pool, &kOne, y, dy, y, dy, x, unused_x, &kZero, x, dx));
  }
  return true;
}

}  // namespace pipetrain::exec::cuda
