#include "executor/cuda/cudnn_conv.h"

#include <algorithm>
#include <string>
#include <vector>

#include "executor/cuda/cudnn_util.h"
#include "executor/device/ops_conv.h"

namespace pipetrain::exec::cuda {

namespace {

// The descriptors of one convolution, freed on scope exit.
struct ConvDescriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  ConvDescriptors() {
    PIPETRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    PIPETRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    PIPETRAIN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    PIPETRAIN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
  }
  ~ConvDescriptors() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
  }
  ConvDescriptors(const ConvDescriptors&) = delete;
  ConvDescriptors& operator=(const ConvDescriptors&) = delete;
};

/// Fills the descriptors for a's Conv (1-D as 2-D with a unit height); false
/// when cuDNN cannot express it: asymmetric or negative pads, or an output
/// size other than the IR's.
bool describe(const cpu::ConvArgs& a, ConvDescriptors& d) {
  const ir::WindowGeometry& g = a.geo;
  const size_t sp = g.rank();
  if (a.transposed || sp < 1 || sp > 3) return false;
  const size_t lead = sp == 1 ? 1 : 0;  // 1-D: a unit height in front
  std::vector<int> pads, strides, dilations,
      xd = {static_cast<int>(a.x[0]), static_cast<int>(a.x[1])},
      wd = {static_cast<int>(a.w[0]), static_cast<int>(a.w[1])},
      yd = {static_cast<int>(a.y[0]), static_cast<int>(a.y[1])};
  if (lead) {
    pads.push_back(0);
    strides.push_back(1);
    dilations.push_back(1);
    xd.push_back(1);
    wd.push_back(1);
    yd.push_back(1);
  }
  for (size_t i = 0; i < sp; ++i) {
    if (g.pads_begin[i] != g.pads_end[i] || g.pads_begin[i] < 0) return false;
    pads.push_back(static_cast<int>(g.pads_begin[i]));
    strides.push_back(static_cast<int>(g.strides[i]));
    dilations.push_back(static_cast<int>(g.dilations[i]));
    xd.push_back(static_cast<int>(g.in[i]));
    wd.push_back(static_cast<int>(g.kernel[i]));
    yd.push_back(static_cast<int>(g.out[i]));
  }
  const int nd = static_cast<int>(xd.size());
  PIPETRAIN_CUDNN_CHECK(
      cudnnSetTensorNdDescriptor(d.x, CUDNN_DATA_FLOAT, nd, xd.data(), packed_strides(xd).data()));
  PIPETRAIN_CUDNN_CHECK(
      cudnnSetFilterNdDescriptor(d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, nd, wd.data()));
  PIPETRAIN_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(d.conv, nd - 2, pads.data(), strides.data(),
                                                        dilations.data(), CUDNN_CROSS_CORRELATION,
                                                        CUDNN_DATA_FLOAT));
  PIPETRAIN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d.conv, static_cast<int>(a.group)));
  // FMA math: no TF32 tensor cores, so results stay within fp32 rounding of the CPU's.
  PIPETRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, CUDNN_FMA_MATH));
  std::vector<int> out(static_cast<size_t>(nd));
  PIPETRAIN_CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(d.conv, d.x, d.w, nd, out.data()));
  if (out != yd) return false;
  PIPETRAIN_CUDNN_CHECK(
      cudnnSetTensorNdDescriptor(d.y, CUDNN_DATA_FLOAT, nd, yd.data(), packed_strides(yd).data()));
  return true;
}

/// The key of a's convolution in direction dir (0 forward, 1 data, 2 filter).
std::vector<int> shape_key(int dir, const cpu::ConvArgs& a) {
  const ir::WindowGeometry& g = a.geo;
  std::vector<int> k = {dir, static_cast<int>(a.group)};
  for (const auto* dims : {&a.x, &a.w, &a.y})
    for (int64_t v : *dims) k.push_back(static_cast<int>(v));
  for (const auto* v : {&g.pads_begin, &g.strides, &g.dilations})
    for (int64_t e : *v) k.push_back(static_cast<int>(e));
  return k;
}

// The most workspace an algorithm may take while cuDNN times them: 512 MiB,
// or half the free device memory where that is less.
size_t workspace_limit() {
  size_t free = 0, total = 0;
  PIPETRAIN_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return std::min(size_t(512) << 20, free / 2);
}

/// The fastest deterministic algorithm of cuDNN's measured, time-sorted list.
template <typename Perf>
ConvAlgorithms::Choice fastest(const Perf* perf, int count) {
  for (int i = 0; i < count; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC)
      return {true, static_cast<int>(perf[i].algo), perf[i].memory};
  return {};
}

/// The remembered choice for key, or the one measure() returns, remembered.
template <typename Measure>
ConvAlgorithms::Choice choose(ConvAlgorithms& algos, const std::vector<int>& key,
                              Measure&& measure) {
  if (const ConvAlgorithms::Choice* c = algos.find(key)) return *c;
  const ConvAlgorithms::Choice c = measure();
  algos.remember(key, c);
  return c;
}

/// y[(n, m, o)] += b[m].
struct AddChannelBias {
  float* y;
  const float* b;
  int64_t channels, size;
  __device__ void operator()(int64_t i) const { y[i] += b[(i / size) % channels]; }
};

}  // namespace

// The timing runs write the outputs; the chosen algorithm then overwrites them.
bool cudnn_conv(CudaExec& ex, cudnnHandle_t h, ConvAlgorithms& algos, const cpu::ConvArgs& a) {
  ConvDescriptors d;
  if (!describe(a, d)) return false;
  const ConvAlgorithms::Choice c = choose(algos, shape_key(0, a), [&] {
    constexpr int kAlgos = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    cudnnConvolutionFwdAlgoPerf_t perf[kAlgos];
    int found = 0;
    const size_t limit = workspace_limit();
    void* ws = ex.scratch<std::byte>(static_cast<int64_t>(limit));
    PIPETRAIN_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
        h, d.x, a.x_data, d.w, a.w_data, d.conv, d.y, a.y_data, kAlgos, &found, perf, ws, limit));
    return fastest(perf, found);
  });
  if (!c.found) return false;
  void* work = ex.scratch<std::byte>(static_cast<int64_t>(c.workspace));
  const float one = 1.0f, zero = 0.0f;
  PIPETRAIN_CUDNN_CHECK(cudnnConvolutionForward(h, &one, d.x, a.x_data, d.w, a.w_data, d.conv,
                                                static_cast<cudnnConvolutionFwdAlgo_t>(c.algo),
                                                work, c.workspace, &zero, d.y, a.y_data));
  if (a.b_data) {
    const int64_t channels = a.y[1], size = ir::numel(a.y) / (a.y[0] * channels);
    ex.for_each(ir::numel(a.y), AddChannelBias{a.y_data, a.b_data, channels, size});
  }
  return true;
}

bool cudnn_conv_grad(CudaExec& ex, cudnnHandle_t h, ConvAlgorithms& algos, const cpu::ConvArgs& a,
                     const float* dy, float* dx, float* dw, float* db) {
  ConvDescriptors d;
  if (!describe(a, d)) return false;
  ConvAlgorithms::Choice data, filter;
  if (dx) {
    data = choose(algos, shape_key(1, a), [&] {
      constexpr int kAlgos = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
      cudnnConvolutionBwdDataAlgoPerf_t perf[kAlgos];
      int found = 0;
      const size_t limit = workspace_limit();
      void* ws = ex.scratch<std::byte>(static_cast<int64_t>(limit));
      PIPETRAIN_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
          h, d.w, a.w_data, d.y, dy, d.conv, d.x, dx, kAlgos, &found, perf, ws, limit));
      return fastest(perf, found);
    });
    if (!data.found) return false;
  }
  if (dw) {
    filter = choose(algos, shape_key(2, a), [&] {
      constexpr int kAlgos = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
      cudnnConvolutionBwdFilterAlgoPerf_t perf[kAlgos];
      int found = 0;
      const size_t limit = workspace_limit();
      void* ws = ex.scratch<std::byte>(static_cast<int64_t>(limit));
      PIPETRAIN_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
          h, d.x, a.x_data, d.y, dy, d.conv, d.w, dw, kAlgos, &found, perf, ws, limit));
      return fastest(perf, found);
    });
    if (!filter.found) return false;
  }
  const float one = 1.0f, zero = 0.0f;
  if (dx) {
    void* work = ex.scratch<std::byte>(static_cast<int64_t>(data.workspace));
    PIPETRAIN_CUDNN_CHECK(
        cudnnConvolutionBackwardData(h, &one, d.w, a.w_data, d.y, dy, d.conv,
                                     static_cast<cudnnConvolutionBwdDataAlgo_t>(data.algo), work,
                                     data.workspace, &zero, d.x, dx));
  }
  if (dw) {
    void* work = ex.scratch<std::byte>(static_cast<int64_t>(filter.workspace));
    PIPETRAIN_CUDNN_CHECK(
        cudnnConvolutionBackwardFilter(h, &one, d.x, a.x_data, d.y, dy, d.conv,
                                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(filter.algo),
                                       work, filter.workspace, &zero, d.w, dw));
  }
  if (db) {
    const int64_t n_batch = a.y[0], m_out = a.y[1];
    device::bias_grad(ex, dy, db, n_batch, m_out, ir::numel(a.y) / (n_batch * m_out));
  }
  return true;
}

}  // namespace pipetrain::exec::cuda
