// Einsum expanded at import: each operand loses its repeated subscripts
// (diagonals, as a Mul by an identity mask and a ReduceSum) and the
// subscripts nobody else needs (ReduceSum); operands are then contracted
// pairwise, left to right, as one batched MatMul (Transpose, Reshape, MatMul,
// Reshape) where the shapes agree, or as a broadcast Mul and ReduceSum where
// an ellipsis broadcasts; a final Transpose gives the output order. Gradients
// and kernels are those ops'.
#include <algorithm>
#include <map>

#include "importer/expansion_builder.h"
#include "importer/op_expansions.h"

namespace pipetrain::importer::detail {

namespace {

using ir::Attribute;

/// A tensor in flight: its name, one subscript per axis, its shape.
struct Term {
  std::string name;
  std::string subs;
  ir::Shape shape;
};

class Einsum {
 public:
  Einsum(ExpansionBuilder& b, const ir::Node& n) : b_(b), n_(n) { parse(); }

  void expand() {
    std::vector<Term> terms;
    for (size_t i = 0; i < inputs_.size(); ++i)
      terms.push_back(
          reduce_unneeded(diagonal({n_.inputs[i], inputs_[i], b_.shape(i)}), terms.size()));
    Term t = terms[0];
    for (size_t i = 1; i < terms.size(); ++i) {
      std::string keep = needed_after(i);  // by the output or a later operand
      t = contract(t, terms[i], keep);
    }
    permuted(reduce_to(t, output_), output_, n_.outputs[0]);
  }

 private:
  /// Splits "ab,bc->ac" into operand and output subscripts; an ellipsis
  /// becomes the digits '0'.. (right-aligned, shared by every operand); an
  /// implicit output is the ellipsis then the subscripts seen once, sorted.
  void parse() {
    std::string eq;
    for (char c : n_.attr_string("equation", ""))
      if (c != ' ') eq += c;
    const size_t arrow = eq.find("->");
    const std::string lhs = eq.substr(0, arrow);
    std::vector<std::string> raw;
    for (size_t at = 0;;) {
      const size_t comma = lhs.find(',', at);
      raw.push_back(lhs.substr(at, comma - at));
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    if (raw.size() != n_.inputs.size())
      b_.fail("equation '" + eq + "' has " + std::to_string(raw.size()) + " operands for " +
              std::to_string(n_.inputs.size()) + " inputs");
    int64_t ellipsis = 0;  // the widest ellipsis
    for (size_t i = 0; i < raw.size(); ++i) {
      const int64_t letters = static_cast<int64_t>(
          std::count_if(raw[i].begin(), raw[i].end(), [](char c) { return std::isalpha(c) != 0; }));
      if (raw[i].find("...") != std::string::npos)
        ellipsis = std::max(ellipsis, static_cast<int64_t>(b_.shape(i).size()) - letters);
    }
    if (ellipsis > 10) b_.fail("an ellipsis of more than 10 axes");
    auto resolve = [&](const std::string& s, int64_t rank) {
      std::string out;
      const size_t dots = s.find("...");
      const int64_t letters = static_cast<int64_t>(
          std::count_if(s.begin(), s.end(), [](char c) { return std::isalpha(c) != 0; }));
      for (size_t k = 0; k < s.size(); ++k) {
        if (k == dots) {
          for (int64_t e = ellipsis - (rank - letters); e < ellipsis; ++e)
            out += static_cast<char>('0' + e);
          k += 2;
        } else if (std::isalpha(s[k])) {
          out += s[k];
        } else {
          b_.fail("equation '" + eq + "': unexpected '" + std::string(1, s[k]) + "'");
        }
      }
      return out;
    };
    for (size_t i = 0; i < raw.size(); ++i) {
      inputs_.push_back(resolve(raw[i], static_cast<int64_t>(b_.shape(i).size())));
      if (inputs_[i].size() != b_.shape(i).size())
        b_.fail("operand " + std::to_string(i) + " '" + raw[i] + "' does not match its shape " +
                ir::shape_str(b_.shape(i)));
      for (size_t k = 0; k < inputs_[i].size(); ++k) {
        const char c = inputs_[i][k];
        const int64_t d = b_.shape(i)[k];
        auto [it, fresh] = size_.emplace(c, d);
        if (!fresh && it->second != d) {
          if (std::isdigit(c) && (d == 1 || it->second == 1))
            it->second = std::max(it->second, d);  // an ellipsis axis broadcasts
          else
            b_.fail("subscript '" + std::string(1, c) + "' is " + std::to_string(it->second) +
                    " in one operand and " + std::to_string(d) + " in another");
        }
      }
    }
    if (arrow != std::string::npos) {
      output_ = resolve(eq.substr(arrow + 2),
                        ellipsis + static_cast<int64_t>(std::count_if(
                                       eq.begin() + static_cast<int64_t>(arrow), eq.end(),
                                       [](char c) { return std::isalpha(c) != 0; })));
      for (char c : output_)
        if (!size_.count(c))
          b_.fail("output subscript '" + std::string(1, c) + "' is in no operand");
    } else {
      for (int64_t e = 0; e < ellipsis; ++e) output_ += static_cast<char>('0' + e);
      std::map<char, int> seen;
      for (const auto& s : inputs_)
        for (char c : s) ++seen[c];
      for (const auto& [c, count] : seen)
        if (std::isalpha(c) && count == 1) output_ += c;
    }
  }

  /// Subscripts used by the output or by operands after the first `upto`.
  std::string needed_after(size_t upto) const {
    std::string s = output_;
    for (size_t i = upto + 1; i < inputs_.size(); ++i) s += inputs_[i];
    return s;
  }

  /// A subscript repeated in one operand takes the diagonal: x * eye, summed over the second.
  Term diagonal(Term t) {
    for (size_t i = 0; i < t.subs.size(); ++i) {
      for (size_t j = i + 1; j < t.subs.size(); ++j) {
        if (t.subs[i] != t.subs[j]) continue;
        const int64_t d = t.shape[i];
        std::vector<float> eye(static_cast<size_t>(d * d), 0.f);
        for (int64_t k = 0; k < d; ++k) eye[static_cast<size_t>(k * d + k)] = 1.f;
        ir::Shape mask_shape(t.shape.size(), 1);
        mask_shape[i] = mask_shape[j] = d;
        const std::string mask = b_.constant(ir::Tensor::from_f32(eye, mask_shape));
        t.name =
            b_.op("ReduceSum", {b_.op("Mul", {t.name, mask}), b_.ints({static_cast<int64_t>(j)})},
                  {{"keepdims", Attribute(int64_t{0})}});
        t.subs.erase(j, 1);
        t.shape.erase(t.shape.begin() + static_cast<int64_t>(j));
        --j;
      }
    }
    return t;
  }

  /// Sums out the subscripts of t not in `keep`.
  Term reduce_to(Term t, const std::string& keep) {
    std::vector<int64_t> axes;
    Term out{t.name, "", {}};
    for (size_t k = 0; k < t.subs.size(); ++k) {
      if (keep.find(t.subs[k]) == std::string::npos) {
        axes.push_back(static_cast<int64_t>(k));
      } else {
        out.subs += t.subs[k];
        out.shape.push_back(t.shape[k]);
      }
    }
    if (axes.empty()) return t;
    out.name = b_.op("ReduceSum", {t.name, b_.ints(axes)}, {{"keepdims", Attribute(int64_t{0})}});
    return out;
  }

  /// Operand i without the subscripts no other operand and not the output use.
  Term reduce_unneeded(Term t, size_t i) {
    std::string keep = output_;
    for (size_t k = 0; k < inputs_.size(); ++k)
      if (k != i) keep += inputs_[k];
    return reduce_to(std::move(t), keep);
  }

  /// t with its axes in `order`: a Transpose, none when already in order
  /// (with `out`, the result is written there, by an Identity if need be).
  Term permuted(const Term& t, const std::string& order, const std::string& out_name = "") {
    std::vector<int64_t> perm;
    Term out{t.name, order, {}};
    for (char c : order) {
      perm.push_back(static_cast<int64_t>(t.subs.find(c)));
      out.shape.push_back(t.shape[static_cast<size_t>(perm.back())]);
    }
    bool identity = true;
    for (size_t k = 0; k < perm.size(); ++k)
      identity = identity && perm[k] == static_cast<int64_t>(k);
    if (!identity)
      out.name = b_.op("Transpose", {t.name}, {{"perm", Attribute(perm)}}, out_name);
    else if (!out_name.empty())
      out.name = b_.op("Identity", {t.name}, {}, out_name);
    return out;
  }

  int64_t product(const Term& t, const std::string& subs) const {
    int64_t p = 1;
    for (char c : subs) p *= t.shape[t.subs.find(c)];
    return p;
  }

  /// a * b summed over their shared subscripts not in `keep`.
  Term contract(const Term& a, const Term& b, const std::string& keep) {
    std::string batch, left, right, sum;
    for (char c : a.subs) {
      const bool in_b = b.subs.find(c) != std::string::npos;
      const bool kept = keep.find(c) != std::string::npos;
      if (in_b)
        (kept ? batch : sum) += c;
      else
        left += c;
    }
    for (char c : b.subs)
      if (a.subs.find(c) == std::string::npos) right += c;
    bool same = true;
    for (char c : batch + sum) same = same && a.shape[a.subs.find(c)] == b.shape[b.subs.find(c)];
    if (!same) return broadcast_contract(a, b, keep);
    // (batch, left, sum) @ (batch, sum, right) -> (batch, left, right)
    const Term pa = permuted(a, batch + left + sum), pb = permuted(b, batch + sum + right);
    const int64_t nb = product(pa, batch), nl = product(pa, left), ns = product(pa, sum),
                  nr = product(pb, right);
    const std::string a3 = b_.op("Reshape", {pa.name, b_.ints({nb, nl, ns})});
    const std::string b3 = b_.op("Reshape", {pb.name, b_.ints({nb, ns, nr})});
    Term out{b_.op("MatMul", {a3, b3}), batch + left + right, {}};
    for (char c : batch + left) out.shape.push_back(pa.shape[pa.subs.find(c)]);
    for (char c : right) out.shape.push_back(pb.shape[pb.subs.find(c)]);
    std::vector<int64_t> dims(out.shape.begin(), out.shape.end());
    out.name = b_.op("Reshape", {out.name, b_.ints(dims)});
    return out;
  }

  /// The general form for broadcasting ellipsis axes: both operands laid out
  /// over the union of subscripts (size 1 where absent), multiplied, summed.
  Term broadcast_contract(const Term& a, const Term& b, const std::string& keep) {
    std::string all = a.subs;
    for (char c : b.subs)
      if (all.find(c) == std::string::npos) all += c;
    auto spread = [&](const Term& t) {
      std::string order;
      for (char c : all)
        if (t.subs.find(c) != std::string::npos) order += c;
      Term p = permuted(t, order);
      std::vector<int64_t> dims;
      for (char c : all)
        dims.push_back(p.subs.find(c) == std::string::npos ? 1 : p.shape[p.subs.find(c)]);
      return b_.op("Reshape", {p.name, b_.ints(dims)});
    };
    Term prod{b_.op("Mul", {spread(a), spread(b)}), all, {}};
    for (char c : all) {
      int64_t d = 1;
      if (a.subs.find(c) != std::string::npos) d = std::max(d, a.shape[a.subs.find(c)]);
      if (b.subs.find(c) != std::string::npos) d = std::max(d, b.shape[b.subs.find(c)]);
      prod.shape.push_back(d);
    }
    return reduce_to(prod, keep);
  }

  ExpansionBuilder& b_;
  const ir::Node& n_;
  std::vector<std::string> inputs_;
  std::string output_;
  std::map<char, int64_t> size_;
};

}  // namespace

std::vector<ir::Node> expand_einsum(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken) {
  ExpansionBuilder b(g, n, taken);
  if (n.inputs.empty()) b.fail("no operands");
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (b.graph().tensor(n.inputs[i]).dtype != ir::DType::kF32)
      b.fail("operand " + std::to_string(i) +
             " is not float32 (Einsum is expanded into float ops)");
  Einsum(b, n).expand();
  return std::move(b.nodes);
}

}  // namespace pipetrain::importer::detail
