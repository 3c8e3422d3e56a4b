// GRU and RNN, unrolled at import over their static sequence length into
// MatMul, Add, activations and Slice/Concat, after the equations of the ONNX
// specification (gates z, r, h; linear_before_reset; clip; forward, reverse
// or bidirectional; layout 0 or 1; constant sequence_lens through masks).
// Unrolling keeps the gradients, the device kernels and the partitioner those
// of the ops they become. LSTM has a kernel of its own (ir/ops/rnn.cc).
#include <algorithm>
#include <array>
#include <functional>
#include <optional>

#include "importer/expansion_builder.h"
#include "importer/op_expansions.h"

namespace pipetrain::importer::detail {

namespace {

using ir::Attribute;

/// One ONNX recurrent activation (f, g) with its alpha/beta, applied by name.
struct Activation {
  std::string name;
  float alpha = 0, beta = 0;
  bool has_alpha = false, has_beta = false;

  std::string apply(ExpansionBuilder& b, const std::string& x) const {
    std::map<std::string, Attribute> attrs;
    if (has_alpha) attrs["alpha"] = Attribute(alpha);
    if (has_beta) attrs["beta"] = Attribute(beta);
    if (name == "Relu" || name == "Tanh" || name == "Sigmoid" || name == "Softsign" ||
        name == "Softplus")
      return b.op(name, {x});
    if (name == "LeakyRelu" || name == "ThresholdedRelu" || name == "Elu" || name == "HardSigmoid")
      return b.op(name, {x}, attrs);
    if (name == "ScaledTanh")  // alpha tanh(beta x)
      return b.op("Mul", {b.op("Tanh", {b.op("Mul", {x, b.scalar(has_beta ? beta : 1.f)})}),
                          b.scalar(has_alpha ? alpha : 1.f)});
    if (name == "Affine")  // alpha x + beta
      return b.op("Add", {b.op("Mul", {x, b.scalar(has_alpha ? alpha : 1.f)}),
                          b.scalar(has_beta ? beta : 0.f)});
    b.fail("activation '" + name + "' is not an ONNX recurrent activation");
  }
};

/// What GRU and RNN share: the geometry, the inputs by direction, the
/// activations, the clip, the masks of sequence_lens, and the outputs.
class Recurrence {
 public:
  Recurrence(ExpansionBuilder& b, const ir::Node& n, int gates, std::vector<std::string> dflt_acts)
      : b_(b), n_(n), gates_(gates) {
    const ir::Shape& x = b.shape(0);
    if (x.size() != 3) b.fail("X " + ir::shape_str(x) + " is not 3-D");
    batch_first_ = n.attr_int("layout", 0) == 1;
    seq_ = batch_first_ ? x[1] : x[0];
    batch_ = batch_first_ ? x[0] : x[1];
    input_ = x[2];
    hidden_ = n.attr_int("hidden_size", 0);
    const std::string dir = n.attr_string("direction", "forward");
    if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
      b.fail("direction '" + dir + "' (forward, reverse or bidirectional)");
    dirs_ = dir == "bidirectional" ? 2 : 1;
    reverse_first_ = dir == "reverse";
    const int64_t g = gates;
    expect(1, {dirs_, g * hidden_, input_}, "W");
    expect(2, {dirs_, g * hidden_, hidden_}, "R");
    if (hidden_ <= 0) {
      if (b.shape(2).size() == 3) hidden_ = b.shape(2)[2];
      if (hidden_ <= 0) b.fail("hidden_size is not given");
    }
    if (n.has_input(3)) expect(3, {dirs_, 2 * g * hidden_}, "B");
    if (n.has_input(5)) expect(5, {dirs_, batch_, hidden_}, "initial_h");
    read_activations(std::move(dflt_acts));
    if (n.has_attr("clip")) clip_ = n.attr_float("clip", 0);
    read_sequence_lens();
    x_ = n.inputs[0];
    if (batch_first_)
      x_ = b.op("Transpose", {x_}, {{"perm", Attribute(std::vector<int64_t>{1, 0, 2})}});
  }

  int64_t seq() const { return seq_; }
  int64_t dirs() const { return dirs_; }
  bool reversed(int64_t d) const { return d == 1 || reverse_first_; }

  /// W[d]'s gate k transposed to (input, hidden): X @ it projects X.
  std::string w_t(int64_t d, int64_t k) { return weight_t(1, d, k, input_); }
  /// R[d]'s gate k transposed to (hidden, hidden).
  std::string r_t(int64_t d, int64_t k) { return weight_t(2, d, k, hidden_); }
  /// B's bias of gate k of W (w = true) or of R, or "" without B.
  std::string bias(int64_t d, int64_t k, bool w) {
    if (!n_.has_input(3)) return "";
    const int64_t off = (w ? 0 : gates_ * hidden_) + k * hidden_;
    return b_.slice(n_.inputs[3], {d, off}, {d + 1, off + hidden_}, {0, 1}, {hidden_});
  }
  /// X @ W[d]_k^T + the biases given, as (seq, batch, hidden).
  std::string project(int64_t d, int64_t k, const std::vector<std::string>& biases) {
    std::string p = b_.op("MatMul", {x_, w_t(d, k)});
    for (const auto& bias : biases)
      if (!bias.empty()) p = b_.op("Add", {p, bias});
    return p;
  }
  /// Step t of a (seq, batch, hidden) projection, as (batch, hidden).
  std::string at(const std::string& p, int64_t t) {
    return b_.slice(p, {t}, {t + 1}, {0}, {batch_, hidden_});
  }
  std::string initial_h(int64_t d) {
    if (n_.has_input(5)) return b_.slice(n_.inputs[5], {d}, {d + 1}, {0}, {batch_, hidden_});
    return b_.constant(
        ir::Tensor::from_f32(std::vector<float>(batch_ * hidden_, 0.f), {batch_, hidden_}));
  }
  /// Activation `i` of direction d (each direction has `per_dir` of them),
  /// after the clip.
  std::string activate(int64_t d, size_t i, const std::string& x) {
    std::string v = x;
    if (clip_) v = b_.op("Clip", {v, b_.scalar(-*clip_), b_.scalar(*clip_)});
    return acts_.at(d * per_dir_ + i).apply(b_, v);
  }

  /// Runs `cell(d, t, h) -> h'` over the sequence in each direction's order,
  /// holds h past each batch entry's length, and writes Y and Y_h.
  void run(const std::function<std::string(int64_t, int64_t, const std::string&)>& cell) {
    std::vector<std::string> y_dirs, h_dirs;
    for (int64_t d = 0; d < dirs_; ++d) {
      std::vector<std::string> ys(seq_);
      std::string h = initial_h(d);
      for (int64_t k = 0; k < seq_; ++k) {
        const int64_t t = reversed(d) ? seq_ - 1 - k : k;
        std::string next = cell(d, t, h);
        if (!masks_.empty()) {  // past a length h holds and y is 0, selected exactly
          next = b_.op("Where", {masks_[t], next, h});
          ys[t] = b_.op("Where", {masks_[t], next, b_.scalar(0.f)});
        } else {
          ys[t] = next;
        }
        h = next;
      }
      if (wants(0)) {
        for (auto& y : ys) y = b_.op("Reshape", {y, b_.ints({1, 1, batch_, hidden_})});
        y_dirs.push_back(b_.concat(ys, 0));
      }
      h_dirs.push_back(b_.op("Reshape", {h, b_.ints({1, batch_, hidden_})}));
    }
    if (wants(0)) write(b_.concat(y_dirs, 1), {2, 0, 1, 3}, n_.outputs[0]);
    if (wants(1)) write(b_.concat(h_dirs, 0), {1, 0, 2}, n_.outputs[1]);
  }

 private:
  bool wants(size_t i) const { return i < n_.outputs.size() && !n_.outputs[i].empty(); }
  void write(const std::string& y, std::vector<int64_t> batch_first_perm, const std::string& out) {
    if (batch_first_)
      b_.op("Transpose", {y}, {{"perm", Attribute(std::move(batch_first_perm))}}, out);
    else
      b_.op("Identity", {y}, {}, out);
  }
  void expect(size_t i, const ir::Shape& want, const std::string& what) {
    const ir::Shape& got = b_.shape(i);
    bool ok = got.size() == want.size();
    for (size_t k = 0; ok && k < got.size(); ++k) ok = want[k] <= 0 || got[k] == want[k];
    if (!ok) b_.fail(what + " " + ir::shape_str(got) + " is not " + ir::shape_str(want));
  }
  std::string weight_t(size_t input, int64_t d, int64_t k, int64_t cols) {
    const std::string w = b_.slice(n_.inputs[input], {d, k * hidden_}, {d + 1, (k + 1) * hidden_},
                                   {0, 1}, {hidden_, cols});
    return b_.op("Transpose", {w}, {{"perm", Attribute(std::vector<int64_t>{1, 0})}});
  }
  void read_activations(std::vector<std::string> dflt) {
    per_dir_ = dflt.size();
    std::vector<std::string> names = n_.attr_strings("activations");
    if (names.empty())
      for (int64_t d = 0; d < dirs_; ++d) names.insert(names.end(), dflt.begin(), dflt.end());
    if (names.size() != per_dir_ * dirs_)
      b_.fail(std::to_string(names.size()) + " activations, " + std::to_string(per_dir_ * dirs_) +
              " expected");
    const auto alphas = n_.attr_floats("activation_alpha");
    const auto betas = n_.attr_floats("activation_beta");
    for (size_t i = 0; i < names.size(); ++i) {
      Activation a{names[i]};
      if (i < alphas.size()) a.alpha = alphas[i], a.has_alpha = true;
      if (i < betas.size()) a.beta = betas[i], a.has_beta = true;
      acts_.push_back(a);
    }
  }
  /// Lengths below seq_ become per-step (batch, 1) bool masks; dynamic lengths are refused.
  void read_sequence_lens() {
    if (!n_.has_input(4)) return;
    const ir::Tensor* lens = b_.graph().value(n_.inputs[4]);
    if (lens == nullptr)
      b_.fail("sequence_lens '" + n_.inputs[4] +
              "' is not a constant: pipetrain unrolls the recurrence at import");
    const std::vector<int64_t> len = lens->to_i64();
    if (static_cast<int64_t>(len.size()) != batch_)
      b_.fail("sequence_lens has " + std::to_string(len.size()) + " values for a batch of " +
              std::to_string(batch_));
    for (int64_t l : len)
      if (l < 0 || l > seq_)
        b_.fail("sequence length " + std::to_string(l) + " is outside [0, " + std::to_string(seq_) +
                "]");
    if (std::all_of(len.begin(), len.end(), [&](int64_t l) { return l == seq_; })) return;
    for (int64_t t = 0; t < seq_; ++t) {
      ir::Tensor m(ir::DType::kBool, {batch_, 1});
      for (int64_t i = 0; i < batch_; ++i) m.data<uint8_t>()[i] = t < len[i] ? 1 : 0;
      masks_.push_back(b_.constant(std::move(m)));
    }
  }

  ExpansionBuilder& b_;
  const ir::Node& n_;
  int64_t gates_;
  int64_t seq_ = 0, batch_ = 0, input_ = 0, hidden_ = 0, dirs_ = 1;
  bool batch_first_ = false, reverse_first_ = false;
  size_t per_dir_ = 0;
  std::vector<Activation> acts_;
  std::optional<float> clip_;
  std::string x_;
  std::vector<std::string> masks_;
};

}  // namespace

// z = f(x Wz + h Rz + b), r = f(x Wr + h Rr + b),
// c = g(x Wh + (r h) Rh + b)  or, with linear_before_reset, g(x Wh + Wbh + r (h Rh + Rbh)),
// h' = (1 - z) c + z h = c + z (h - c).
std::vector<ir::Node> expand_gru(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken) {
  ExpansionBuilder b(g, n, taken);
  Recurrence rec(b, n, 3, {"Sigmoid", "Tanh"});
  const bool lbr = n.attr_int("linear_before_reset", 0) != 0;
  std::vector<std::array<std::string, 3>> xp(rec.dirs()), rt(rec.dirs());
  std::vector<std::string> rbh(rec.dirs());
  for (int64_t d = 0; d < rec.dirs(); ++d) {
    for (int64_t k = 0; k < 3; ++k) {
      rt[d][k] = rec.r_t(d, k);
      const bool r_bias_inside = lbr && k == 2;
      xp[d][k] =
          rec.project(d, k, {rec.bias(d, k, true), r_bias_inside ? "" : rec.bias(d, k, false)});
    }
    if (lbr) rbh[d] = rec.bias(d, 2, false);
  }
  rec.run([&](int64_t d, int64_t t, const std::string& h) {
    auto gate = [&](int64_t k) {
      return rec.activate(d, 0, b.op("Add", {rec.at(xp[d][k], t), b.op("MatMul", {h, rt[d][k]})}));
    };
    const std::string z = gate(0), r = gate(1);
    std::string hidden;
    if (lbr) {
      hidden = b.op("MatMul", {h, rt[d][2]});
      if (!rbh[d].empty()) hidden = b.op("Add", {hidden, rbh[d]});
      hidden = b.op("Mul", {r, hidden});
    } else {
      hidden = b.op("MatMul", {b.op("Mul", {r, h}), rt[d][2]});
    }
    const std::string c = rec.activate(d, 1, b.op("Add", {rec.at(xp[d][2], t), hidden}));
    return b.op("Add", {c, b.op("Mul", {z, b.op("Sub", {h, c})})});
  });
  return std::move(b.nodes);
}

// h' = f(x W + h R + Wb + Rb).
std::vector<ir::Node> expand_rnn(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken) {
  ExpansionBuilder b(g, n, taken);
  Recurrence rec(b, n, 1, {"Tanh"});
  std::vector<std::string> xp(rec.dirs()), rt(rec.dirs());
  for (int64_t d = 0; d < rec.dirs(); ++d) {
    rt[d] = rec.r_t(d, 0);
    xp[d] = rec.project(d, 0, {rec.bias(d, 0, true), rec.bias(d, 0, false)});
  }
  rec.run([&](int64_t d, int64_t t, const std::string& h) {
    return rec.activate(d, 0, b.op("Add", {rec.at(xp[d], t), b.op("MatMul", {h, rt[d]})}));
  });
  return std::move(b.nodes);
}

}  // namespace pipetrain::importer::detail
