// DFT, STFT and MelWeightMatrix expanded at import. A DFT of static length
// is two MatMuls with constant cosine and sine matrices (the real and
// imaginary parts), so its gradient is theirs; STFT gathers the frames with a
// constant index, applies the window and takes their one-sided DFT;
// MelWeightMatrix is a constant, computed as ONNX's reference computes it.
#include <cmath>

#include "importer/expansion_builder.h"
#include "importer/op_expansions.h"

namespace pipetrain::importer::detail {

namespace {

using ir::Attribute;
constexpr double kPi = 3.14159265358979323846;

/// The DFT along `axis` of x (shape `shape`, its last axis 1 = real or 2 =
/// complex), over `length` points (zero-padded or cut), one-sided or full,
/// forward or inverse; written to `out`. Output: the same shape with `axis`
/// the output length and the last axis 2.
void dft(ExpansionBuilder& b, std::string x, ir::Shape shape, int64_t axis, int64_t length,
         bool onesided, bool inverse, const std::string& out) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank < 2 || (shape.back() != 1 && shape.back() != 2))
    b.fail("input " + ir::shape_str(shape) + " does not end in 1 (real) or 2 (complex) values");
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank - 1)
    b.fail("axis " + std::to_string(axis) + " is not a signal axis of " + ir::shape_str(shape));
  const int64_t have = shape[static_cast<size_t>(axis)];
  if (length < 1) b.fail("dft_length " + std::to_string(length) + " is not positive");
  if (length < have) {
    x = b.op("Slice", {x, b.ints({0}), b.ints({length}), b.ints({axis})});
  } else if (length > have) {
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
    pads[static_cast<size_t>(rank + axis)] = length - have;
    x = b.op("Pad", {x, b.ints(pads)});
  }
  shape[static_cast<size_t>(axis)] = length;
  // The signal axis next to last: (..., N, c).
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < rank - 1; ++d)
    if (d != axis) perm.push_back(d);
  perm.push_back(axis);
  perm.push_back(rank - 1);
  bool moved = false;
  for (int64_t d = 0; d < rank; ++d) moved = moved || perm[static_cast<size_t>(d)] != d;
  if (moved) x = b.op("Transpose", {x}, {{"perm", Attribute(perm)}});
  const bool complex = shape.back() == 2;
  auto part = [&](int64_t k) {
    return b.op("Squeeze", {b.op("Slice", {x, b.ints({k}), b.ints({k + 1}), b.ints({rank - 1})}),
                            b.ints({rank - 1})});
  };
  const std::string re = part(0);
  const int64_t out_len = onesided ? length / 2 + 1 : length;
  std::vector<float> c(static_cast<size_t>(length * out_len)), s(c.size());
  const double scale = inverse ? 1.0 / static_cast<double>(length) : 1.0;
  for (int64_t t = 0; t < length; ++t)
    for (int64_t k = 0; k < out_len; ++k) {
      // (t k) mod N keeps the angle small, so cos and sin stay exact to rounding.
      const double angle =
          2 * kPi * static_cast<double>((t * k) % length) / static_cast<double>(length);
      c[static_cast<size_t>(t * out_len + k)] = static_cast<float>(std::cos(angle) * scale);
      s[static_cast<size_t>(t * out_len + k)] = static_cast<float>(std::sin(angle) * scale);
    }
  const std::string cm = b.constant(ir::Tensor::from_f32(c, {length, out_len}));
  const std::string sm = b.constant(ir::Tensor::from_f32(s, {length, out_len}));
  // forward: (re + i im)(cos - i sin); inverse: (re + i im)(cos + i sin) / N
  std::string y_re = b.op("MatMul", {re, cm});
  std::string y_im = b.op("Neg", {b.op("MatMul", {re, sm})});
  if (inverse) y_im = b.op("MatMul", {re, sm});
  if (complex) {
    const std::string im = part(1);
    const std::string im_c = b.op("MatMul", {im, cm}), im_s = b.op("MatMul", {im, sm});
    y_re = inverse ? b.op("Sub", {y_re, im_s}) : b.op("Add", {y_re, im_s});
    y_im = b.op("Add", {y_im, im_c});
  }
  const std::string stacked = b.op("Concat",
                                   {b.op("Unsqueeze", {y_re, b.ints({rank - 1})}),
                                    b.op("Unsqueeze", {y_im, b.ints({rank - 1})})},
                                   {{"axis", Attribute(rank - 1)}}, moved ? "" : out);
  if (moved) {
    std::vector<int64_t> back(static_cast<size_t>(rank));
    for (int64_t d = 0; d < rank; ++d) back[static_cast<size_t>(perm[static_cast<size_t>(d)])] = d;
    b.op("Transpose", {stacked}, {{"perm", Attribute(back)}}, out);
  }
}

}  // namespace

std::vector<ir::Node> expand_dft(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken) {
  ExpansionBuilder b(g, n, taken);
  const ir::Shape shape = b.shape(0);
  if (n.inputs.size() > 2 && !n.inputs[2].empty())
    b.fail("axis as an input (opset 20) is not supported; use the axis attribute");
  const int64_t axis = n.attr_int("axis", 1);
  int64_t length =
      shape.size() > 1
          ? shape[static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(shape.size()) : axis)]
          : 0;
  if (n.has_input(1)) length = static_cast<int64_t>(b.constant_input(1, "dft_length").at(0));
  const bool onesided = n.attr_int("onesided", 0) != 0, inverse = n.attr_int("inverse", 0) != 0;
  if (onesided && inverse) b.fail("onesided and inverse together are not defined");
  if (onesided && shape.back() == 2) b.fail("a one-sided DFT needs a real input");
  dft(b, n.inputs[0], shape, axis, length, onesided, inverse, n.outputs[0]);
  return std::move(b.nodes);
}

std::vector<ir::Node> expand_stft(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken) {
  ExpansionBuilder b(g, n, taken);
  const ir::Shape signal = b.shape(0);
  if (signal.size() != 3 || (signal[2] != 1 && signal[2] != 2))
    b.fail("signal " + ir::shape_str(signal) + " is not (batch, length, 1 or 2)");
  const int64_t step = static_cast<int64_t>(b.constant_input(1, "frame_step").at(0));
  int64_t frame = -1;
  if (n.has_input(2)) frame = b.shape(2).size() == 1 ? b.shape(2)[0] : -1;
  if (n.has_input(3)) {
    const int64_t given = static_cast<int64_t>(b.constant_input(3, "frame_length").at(0));
    if (frame >= 0 && given != frame)
      b.fail("frame_length " + std::to_string(given) + " differs from the window's " +
             std::to_string(frame));
    frame = given;
  }
  if (frame < 1) b.fail("neither a window nor a frame_length gives the frame length");
  if (step < 1) b.fail("frame_step " + std::to_string(step) + " is not positive");
  if (frame > signal[1])
    b.fail("frames of " + std::to_string(frame) + " do not fit a signal of " +
           std::to_string(signal[1]));
  const int64_t frames = (signal[1] - frame) / step + 1;
  std::vector<int64_t> idx;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t l = 0; l < frame; ++l) idx.push_back(f * step + l);
  std::string x =
      b.op("Gather", {n.inputs[0], b.constant(ir::Tensor::from_i64(idx, {frames, frame}))},
           {{"axis", Attribute(int64_t{1})}});
  if (n.has_input(2))
    x = b.op("Mul", {x, b.op("Reshape", {n.inputs[2], b.ints({1, 1, frame, 1})})});
  const bool onesided = n.attr_int("onesided", 1) != 0;
  if (onesided && signal[2] == 2) b.fail("a one-sided STFT needs a real signal");
  dft(b, x, {signal[0], frames, frame, signal[2]}, 2, frame, onesided, false, n.outputs[0]);
  return std::move(b.nodes);
}

// ONNX's reference: triangles between mel-spaced points, in spectrogram bins.
std::vector<ir::Node> expand_mel_weight_matrix(ir::Graph& g, const ir::Node& n,
                                               std::set<std::string>& taken) {
  ExpansionBuilder b(g, n, taken);
  const int64_t bins = static_cast<int64_t>(b.constant_input(0, "num_mel_bins").at(0));
  const int64_t dft_length = static_cast<int64_t>(b.constant_input(1, "dft_length").at(0));
  const int64_t rate = static_cast<int64_t>(b.constant_input(2, "sample_rate").at(0));
  const double lower = b.constant_input(3, "lower_edge_hertz").at(0);
  const double upper = b.constant_input(4, "upper_edge_hertz").at(0);
  if (n.attr_int("output_datatype", 1) != 1) b.fail("output_datatype other than float");
  if (bins < 1 || dft_length < 1 || rate < 1)
    b.fail("num_mel_bins, dft_length and sample_rate must be positive");
  const int64_t spectrum = dft_length / 2 + 1;
  auto mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  const double low = mel(lower), step = (mel(upper) - low) / static_cast<double>(bins + 2);
  std::vector<int64_t> point(static_cast<size_t>(bins + 2));
  for (int64_t i = 0; i < bins + 2; ++i) {
    const double hz = 700 * (std::pow(10, (static_cast<double>(i) * step + low) / 2595) - 1);
    point[static_cast<size_t>(i)] = static_cast<int64_t>(
        std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(rate)));
  }
  std::vector<float> w(static_cast<size_t>(spectrum * bins), 0.f);
  auto at = [&](int64_t j, int64_t i) -> float& {
    if (j < 0 || j >= spectrum)
      b.fail("a mel band reaches bin " + std::to_string(j) + " of " + std::to_string(spectrum));
    return w[static_cast<size_t>(j * bins + i)];
  };
  for (int64_t i = 0; i < bins; ++i) {
    const int64_t lo = point[static_cast<size_t>(i)], mid = point[static_cast<size_t>(i + 1)],
                  hi = point[static_cast<size_t>(i + 2)];
    if (mid == lo) {
      at(mid, i) = 1;
    } else {
      for (int64_t j = lo; j <= mid; ++j)
        at(j, i) = static_cast<float>(static_cast<double>(j - lo) / static_cast<double>(mid - lo));
    }
    if (hi > mid)
      for (int64_t j = mid; j < hi; ++j)
        at(j, i) = static_cast<float>(static_cast<double>(hi - j) / static_cast<double>(hi - mid));
  }
  b.op("Identity", {b.constant(ir::Tensor::from_f32(w, {spectrum, bins}))}, {}, n.outputs[0]);
  return std::move(b.nodes);
}

}  // namespace pipetrain::importer::detail
