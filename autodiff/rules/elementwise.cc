// Gradients of the elementwise ops. Broadcast inputs get their gradient summed
// back to their own shape (reduce_to).
#include "autodiff/grad_builder.h"

namespace pipetrain::autodiff {

namespace {

using ir::Attribute;

// dA = dY, dB = dY
void add_grad(GradBuilder& b) {
  if (b.wants(0)) b.set_GI(0, b.reduce_to(b.GO(0), b.shape(b.I(0))));
  if (b.wants(1)) b.set_GI(1, b.reduce_to(b.GO(0), b.shape(b.I(1))));
}

// dA = dY, dB = -dY
void sub_grad(GradBuilder& b) {
  if (b.wants(0)) b.set_GI(0, b.reduce_to(b.GO(0), b.shape(b.I(0))));
  if (b.wants(1)) b.set_GI(1, b.reduce_to(b.emit1("Neg", {b.GO(0)}), b.shape(b.I(1))));
}

// dA = dY * B, dB = dY * A
void mul_grad(GradBuilder& b) {
  const std::string a = b.I(0), c = b.I(1);
  if (b.wants(0)) b.set_GI(0, b.reduce_to(b.emit1("Mul", {b.GO(0), c}), b.shape(a)));
  if (b.wants(1)) b.set_GI(1, b.reduce_to(b.emit1("Mul", {b.GO(0), a}), b.shape(c)));
}

// dA = dY / B, dB = -dY * Y / B
void div_grad(GradBuilder& b) {
  const std::string a = b.I(0), c = b.I(1), y = b.O(0);
  if (b.wants(0)) b.set_GI(0, b.reduce_to(b.emit1("Div", {b.GO(0), c}), b.shape(a)));
  if (b.wants(1)) {
    std::string t = b.emit1("Div", {b.emit1("Mul", {b.GO(0), y}), c});
    b.set_GI(1, b.reduce_to(b.emit1("Neg", {t}), b.shape(c)));
  }
}

// Y = A^B: dA = dY * B * A^(B-1), dB = dY * Y * ln(A)
void pow_grad(GradBuilder& b) {
  const std::string a = b.I(0), y = b.O(0);
  std::string e = b.I(1);
  if (b.dtype(e) != b.dtype(a))
    e = b.emit1("Cast", {e}, {{"to", Attribute(static_cast<int64_t>(b.dtype(a)))}});
  if (b.wants(0)) {
    std::string am1 = b.emit1("Pow", {a, b.emit1("Sub", {e, b.scalar(1.0f)})});
    std::string t = b.emit1("Mul", {b.GO(0), b.emit1("Mul", {e, am1})});
    b.set_GI(0, b.reduce_to(t, b.shape(a)));
  }
  if (b.wants(1)) {
    std::string t = b.emit1("Mul", {b.GO(0), b.emit1("Mul", {y, b.emit1("Log", {a})})});
    b.set_GI(1, b.reduce_to(t, b.shape(b.I(1))));
  }
}

// Y = A mod B = A - B q (q the rounded quotient, constant almost everywhere):
// dA = dY, dB = -dY q with q = (A - Y) / B.
void mod_grad(GradBuilder& b) {
  const std::string a = b.I(0), c = b.I(1);
  if (b.wants(0)) b.set_GI(0, b.reduce_to(b.GO(0), b.shape(a)));
  if (b.wants(1)) {
    std::string q = b.emit1("Div", {b.emit1("Sub", {a, b.O(0)}), c});
    b.set_GI(1, b.reduce_to(b.emit1("Neg", {b.emit1("Mul", {b.GO(0), q})}), b.shape(c)));
  }
}

// Sum: every input gets dY; Mean: dY / N (summed back over broadcasting).
void sum_grad(GradBuilder& b) {
  for (size_t i = 0; i < b.node().inputs.size(); ++i)
    if (b.wants(i)) b.set_GI(i, b.reduce_to(b.GO(0), b.shape(b.I(i))));
}
void mean_grad(GradBuilder& b) {
  const size_t n = b.node().inputs.size();
  const std::string g = b.emit1("Div", {b.GO(0), b.scalar(static_cast<float>(n))});
  for (size_t i = 0; i < n; ++i)
    if (b.wants(i)) b.set_GI(i, b.reduce_to(g, b.shape(b.I(i))));
}

// Max/Min of two inputs: the gradient goes to the input that won (A on ties).
void select_grad(GradBuilder& b, const char* loses_op) {
  if (b.node().inputs.size() != 2) b.unsupported("Max/Min with other than two inputs");
  const std::string a = b.I(0), c = b.I(1);
  std::string a_wins = b.emit1("Not", {b.emit1(loses_op, {a, c})});
  if (b.wants(0))
    b.set_GI(0, b.reduce_to(b.emit1("Where", {a_wins, b.GO(0), b.scalar(0.0f)}), b.shape(a)));
  if (b.wants(1))
    b.set_GI(1, b.reduce_to(b.emit1("Where", {a_wins, b.scalar(0.0f), b.GO(0)}), b.shape(c)));
}
void max_grad(GradBuilder& b) {
  select_grad(b, "Less");
}
void min_grad(GradBuilder& b) {
  select_grad(b, "Greater");
}

// Y = sqrt(X): dX = dY * 0.5 / Y
void sqrt_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("Div", {b.emit1("Mul", {b.GO(0), b.scalar(0.5f)}), b.O(0)}));
}
void neg_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("Neg", {b.GO(0)}));
}
// Y = exp(X): dX = dY * Y
void exp_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("Mul", {b.GO(0), b.O(0)}));
}
// dX = dY / X
void log_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("Div", {b.GO(0), b.I(0)}));
}
// Y = 1/X: dX = -dY * Y^2
void reciprocal_grad(GradBuilder& b) {
  const std::string y = b.O(0);
  b.set_GI(0, b.emit1("Neg", {b.emit1("Mul", {b.GO(0), b.emit1("Mul", {y, y})})}));
}
// dX = dY * sign(X) (0 at 0, like PyTorch)
void abs_grad(GradBuilder& b) {
  const std::string x = b.I(0), zero = b.scalar(0.0f);
  std::string pos = b.emit1("Where", {b.emit1("Greater", {x, zero}), b.GO(0), zero});
  std::string neg = b.emit1("Neg", {b.GO(0)});
  b.set_GI(0, b.emit1("Where", {b.emit1("Less", {x, zero}), neg, pos}));
}
// d erf(x)/dx = 2/sqrt(pi) exp(-x^2)
void erf_grad(GradBuilder& b) {
  const std::string x = b.I(0);
  std::string e = b.emit1("Exp", {b.emit1("Neg", {b.emit1("Mul", {x, x})})});
  b.set_GI(0, b.emit1("Mul", {b.GO(0), b.emit1("Mul", {e, b.scalar(1.1283791670955126f)})}));
}

// sin' = cos, cos' = -sin.
void sin_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("Mul", {b.GO(0), b.emit1("Cos", {b.I(0)})}));
}
void cos_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("Neg", {b.emit1("Mul", {b.GO(0), b.emit1("Sin", {b.I(0)})})}));
}

// dX = dY * f'(X) for the trigonometric and hyperbolic functions, f' built
// from X (or Y for tan).
std::string x_squared(GradBuilder& b) {
  return b.emit1("Mul", {b.I(0), b.I(0)});
}
// tan' = 1 + tan^2
void tan_grad(GradBuilder& b) {
  const std::string y = b.O(0);
  std::string d = b.emit1("Add", {b.scalar(1.0f), b.emit1("Mul", {y, y})});
  b.set_GI(0, b.emit1("Mul", {b.GO(0), d}));
}
// asin' = 1 / sqrt(1 - x^2), acos' = -asin'
void asin_grad(GradBuilder& b) {
  std::string r = b.emit1("Sqrt", {b.emit1("Sub", {b.scalar(1.0f), x_squared(b)})});
  b.set_GI(0, b.emit1("Div", {b.GO(0), r}));
}
void acos_grad(GradBuilder& b) {
  std::string r = b.emit1("Sqrt", {b.emit1("Sub", {b.scalar(1.0f), x_squared(b)})});
  b.set_GI(0, b.emit1("Neg", {b.emit1("Div", {b.GO(0), r})}));
}
// atan' = 1 / (1 + x^2)
void atan_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("Div", {b.GO(0), b.emit1("Add", {b.scalar(1.0f), x_squared(b)})}));
}
// sinh' = cosh, cosh' = sinh
void sinh_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("Mul", {b.GO(0), b.emit1("Cosh", {b.I(0)})}));
}
void cosh_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("Mul", {b.GO(0), b.emit1("Sinh", {b.I(0)})}));
}
// asinh' = 1 / sqrt(x^2 + 1), acosh' = 1 / sqrt(x^2 - 1)
void asinh_grad(GradBuilder& b) {
  std::string r = b.emit1("Sqrt", {b.emit1("Add", {x_squared(b), b.scalar(1.0f)})});
  b.set_GI(0, b.emit1("Div", {b.GO(0), r}));
}
void acosh_grad(GradBuilder& b) {
  std::string r = b.emit1("Sqrt", {b.emit1("Sub", {x_squared(b), b.scalar(1.0f)})});
  b.set_GI(0, b.emit1("Div", {b.GO(0), r}));
}
// atanh' = 1 / (1 - x^2)
void atanh_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("Div", {b.GO(0), b.emit1("Sub", {b.scalar(1.0f), x_squared(b)})}));
}

// Y = cond ? A : B: dA = cond ? dY : 0, dB = cond ? 0 : dY
void where_grad(GradBuilder& b) {
  const std::string c = b.I(0), zero = b.scalar(0.0f);
  if (b.wants(1)) b.set_GI(1, b.reduce_to(b.emit1("Where", {c, b.GO(0), zero}), b.shape(b.I(1))));
  if (b.wants(2)) b.set_GI(2, b.reduce_to(b.emit1("Where", {c, zero, b.GO(0)}), b.shape(b.I(2))));
}

// Between float types the gradient is cast back.
void cast_grad(GradBuilder& b) {
  const std::string x = b.I(0);
  b.set_GI(0, b.emit1("Cast", {b.GO(0)}, {{"to", Attribute(static_cast<int64_t>(b.dtype(x)))}}));
}

}  // namespace

void register_elementwise_rules(std::map<std::string, RuleEntry>& r) {
  r["Add"] = {add_grad};
  r["Sub"] = {sub_grad};
  r["Mul"] = {mul_grad};
  r["Div"] = {div_grad};
  r["Pow"] = {pow_grad};
  r["Max"] = {max_grad};
  r["Min"] = {min_grad};
  r["Sqrt"] = {sqrt_grad};
  r["Neg"] = {neg_grad};
  r["Exp"] = {exp_grad};
  r["Log"] = {log_grad};
  r["Reciprocal"] = {reciprocal_grad};
  r["Abs"] = {abs_grad};
  r["Erf"] = {erf_grad};
  r["Sin"] = {sin_grad};
  r["Cos"] = {cos_grad};
  r["Tan"] = {tan_grad};
  r["Asin"] = {asin_grad};
  r["Acos"] = {acos_grad};
  r["Atan"] = {atan_grad};
  r["Sinh"] = {sinh_grad};
  r["Cosh"] = {cosh_grad};
  r["Asinh"] = {asinh_grad};
  r["Acosh"] = {acosh_grad};
  r["Atanh"] = {atanh_grad};
  r["Mod"] = {mod_grad};
  r["Sum"] = {sum_grad};
  r["Mean"] = {mean_grad};
  r["Where"] = {where_grad};
  r["Cast"] = {cast_grad};
  r["CastLike"] = {cast_grad};
  for (const char* op : {"Equal", "Less", "Greater", "GreaterOrEqual", "LessOrEqual", "Not", "And",
                         "Or", "Xor", "IsNaN", "IsInf"})
    r[op] = {nullptr};
  // Piecewise constant: zero gradient almost everywhere, as PyTorch's.
  for (const char* op : {"Floor", "Ceil", "Round", "Sign"}) r[op] = {nullptr};
}

}  // namespace pipetrain::autodiff
