// Optimizers, schedules and clipping against PyTorch 1.13 (torch.optim, CPU, float32).
#include "executor/optim/optimizer.h"

#include <gtest/gtest.h>

#include <cstring>

#include <cmath>

#include "ir/error.h"

namespace pipetrain::exec {
namespace {

/* The reference values below come from /usr/bin/python3 (torch 1.13):

import torch, math
p0 = [0.5, -1.25, 2.0, 0.0, -0.3]
def grad(k):  # exact in float32
    return torch.tensor([((i * 7 + k * 3) % 11 - 5) * 0.25 for i in range(5)], dtype=torch.float32)
cases = {
  "sgd": (torch.optim.SGD, dict()),
  "sgd_momentum": (torch.optim.SGD, dict(momentum=0.9)),
  "sgd_dampening_wd": (torch.optim.SGD, dict(momentum=0.9, dampening=0.5, weight_decay=0.01)),
  "sgd_nesterov_wd": (torch.optim.SGD, dict(momentum=0.9, nesterov=True, weight_decay=0.1)),
  "adam": (torch.optim.Adam, dict()),
  "adam_wd_amsgrad": (torch.optim.Adam, dict(weight_decay=0.1, amsgrad=True)),
  "adamw": (torch.optim.AdamW, dict(weight_decay=0.1)),
  "adamw_amsgrad_betas": (torch.optim.AdamW,
                          dict(weight_decay=0.05, amsgrad=True, betas=(0.8, 0.99), eps=1e-6)),
}
def f(t): return "{" + ", ".join("%.9gf" % v for v in t.tolist()) + "}"
for name, (cls, kw) in cases.items():
    p = torch.nn.Parameter(torch.tensor(p0, dtype=torch.float32))
    base = 0.1 if cls is torch.optim.SGD else 0.01
    opt = cls([p], lr=base, **kw)
    for k in range(4):
        opt.param_groups[0]["lr"] = base * (1 - 0.1 * k)
        p.grad = grad(k)
        opt.step()
    st = opt.state[p]
    extra = (f(st["momentum_buffer"]) if st.get("momentum_buffer") is not None else
             (f(st["exp_avg_sq"]) if "exp_avg_sq" in st else "{}"))
    print('{"%s", %s, %s},' % (name, f(p.detach()), extra))
def lrs(make, n=12):
    p = torch.nn.Parameter(torch.zeros(1)); opt = torch.optim.SGD([p], lr=0.1)
    s = make(opt); out = []
    for k in range(n):
        out.append(opt.param_groups[0]["lr"]); opt.step(); s.step()
    return "{" + ", ".join("%.17g" % v for v in out) + "}"
print("step", lrs(lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5)))
print("cosine", lrs(lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=8,
                                                                          eta_min=0.001), 9))
def warm_cos(s, w=3, T=10, mn=0.001, base=0.1):
    if s < w: return s / w
    t = s - w
    return (mn + (base - mn) * (1 + math.cos(math.pi * t / (T - w))) / 2) / base if t < T - w \
        else mn / base
print("warmup_cosine", lrs(lambda o: torch.optim.lr_scheduler.LambdaLR(o, warm_cos)))
print("warmup_step", lrs(lambda o: torch.optim.lr_scheduler.SequentialLR(o, [
    torch.optim.lr_scheduler.LambdaLR(o, lambda s: s / 2),
    torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5)], milestones=[2])))
a = torch.nn.Parameter(torch.zeros(2)); b = torch.nn.Parameter(torch.zeros(1))
a.grad = torch.tensor([3.0, 4.0]); b.grad = torch.tensor([12.0])
n = torch.nn.utils.clip_grad_norm_([a, b], 6.5)
print("clip", "%.9g" % n.item(), f(a.grad), f(b.grad))
*/

struct Case {
  const char* name;
  std::vector<float> param;  // after 4 steps
  std::vector<float> state;  // momentum buffer (sgd) or exp_avg_sq (adam)
};

const Case kCases[] = {
    {"sgd", {0.580000043f, -1.35249996f, 2.01749992f, -0.109999999f, -0.317500025f}, {}},
    {"sgd_momentum",
     {0.874637485f, -1.56453991f, 2.02074003f, -0.259512484f, -0.432407498f},
     {-0.0912499428f, 0.701999962f, -0.261999965f, 1.05375004f, -0.15775004f}},
    {"sgd_dampening_wd",
     {0.869843423f, -1.4748466f, 2.07419872f, -0.314914525f, -0.401642948f},
     {-0.487533092f, 0.505407631f, -0.270763159f, 0.979896128f, 0.00498841703f}},
    {"sgd_nesterov_wd",
     {0.846960127f, -1.49975526f, 1.83794951f, -0.329777956f, -0.399102092f},
     {0.177605093f, 0.21561189f, 0.411151886f, 0.995235145f, -0.298221141f}},
    {"adam",
     {0.522835612f, -1.27289987f, 2.00943947f, -0.0155253084f, -0.3178837f},
     {0.00286975503f, 0.00237056497f, 0.00231062598f, 0.00268169283f, 0.00212181383f}},
    {"adam_wd_amsgrad",
     {0.521964192f, -1.27051842f, 2.00134158f, -0.0155042065f, -0.317192495f},
     {0.00283503509f, 0.00218523294f, 0.00237275125f, 0.00268126f, 0.00212826533f}},
    {"adamw",
     {0.521098554f, -1.26861668f, 2.00262308f, -0.0154979145f, -0.316828847f},
     {0.00286975503f, 0.00237056497f, 0.00231062598f, 0.00268169283f, 0.00212181383f}},
    {"adamw_amsgrad_betas",
     {0.520307422f, -1.27000558f, 2.00506091f, -0.0146203674f, -0.316610664f},
     {0.0282299202f, 0.0233085584f, 0.0229383111f, 0.026298983f, 0.020932436f}},
};

OptimizerConfig config_for(const std::string& name) {
  OptimizerConfig c;
  c.kind = name.rfind("adamw", 0) == 0 ? "adamw" : name.rfind("adam", 0) == 0 ? "adam" : "sgd";
  c.lr = c.kind == "sgd" ? 0.1 : 0.01;
  if (name == "sgd_momentum") c.momentum = 0.9;
  if (name == "sgd_dampening_wd") c.momentum = 0.9, c.dampening = 0.5, c.weight_decay = 0.01;
  if (name == "sgd_nesterov_wd") c.momentum = 0.9, c.nesterov = true, c.weight_decay = 0.1;
  if (name == "adam_wd_amsgrad") c.weight_decay = 0.1, c.amsgrad = true;
  if (name == "adamw") c.weight_decay = 0.1;
  if (name == "adamw_amsgrad_betas") {
    c.weight_decay = 0.05, c.amsgrad = true, c.beta1 = 0.8, c.beta2 = 0.99, c.eps = 1e-6;
  }
  return c;
}

ir::Tensor grad_at(int k) {
  std::vector<float> g;
  for (int i = 0; i < 5; ++i) g.push_back(static_cast<float>(((i * 7 + k * 3) % 11 - 5) * 0.25));
  return ir::Tensor::from_f32(g, {5});
}

void expect_close(const float* got, const std::vector<float>& want, const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 2e-6 * std::abs(want[i]) + 1e-7) << what << " element " << i;
}

TEST(Optimizer, MatchesTorchOverFourStepsWithChangingLr) {
  for (const Case& c : kCases) {
    ir::Graph g;
    g.set_value("w", ir::Tensor::from_f32({0.5f, -1.25f, 2.0f, 0.0f, -0.3f}, {5}),
                ir::Role::kParam);
    OptimizerConfig cfg = config_for(c.name);
    auto opt = Optimizer::create(cfg, g, {"w"});
    for (int k = 0; k < 4; ++k) opt->step(g, {{"w", grad_at(k)}}, cfg.lr * (1 - 0.1 * k));
    expect_close(g.value("w")->data<float>(), c.param, c.name);
    EXPECT_EQ(g.value("w.step")->data<int64_t>()[0], 4) << c.name;
    if (!c.state.empty()) {
      const std::string state = cfg.kind == "sgd" ? "w.momentum" : "w.exp_avg_sq";
      ASSERT_NE(g.value(state), nullptr) << c.name;
      EXPECT_EQ(g.tensor(state).role, ir::Role::kOptimizerState);
      expect_close(g.value(state)->data<float>(), c.state, std::string(c.name) + " " + state);
    }
  }
}

TEST(Optimizer, StateNamesAndSkippedParams) {
  ir::Graph g;
  g.set_value("a", ir::Tensor::from_f32({1, 2}, {2}), ir::Role::kParam);
  g.set_value("b", ir::Tensor::from_f32({3}, {1}), ir::Role::kParam);
  OptimizerConfig cfg;
  cfg.kind = "adam";
  cfg.amsgrad = true;
  auto opt = Optimizer::create(cfg, g, {"a", "b"});
  EXPECT_EQ(opt->state_names("a"),
            (std::vector<std::string>{"a.step", "a.exp_avg", "a.exp_avg_sq", "a.max_exp_avg_sq"}));
  EXPECT_EQ(g.value("a.exp_avg")->shape(), (ir::Shape{2}));
  EXPECT_EQ(g.tensor("a.step").role, ir::Role::kOptimizerState);
  // b has no gradient: untouched, its step count too (torch skips a param whose grad is None).
  opt->step(g, {{"a", ir::Tensor::from_f32({1, -1}, {2})}}, 0.1);
  EXPECT_EQ(g.value("b")->data<float>()[0], 3.0f);
  EXPECT_EQ(g.value("b.step")->data<int64_t>()[0], 0);
  // Adam's first step moves each element by lr * sign(g) (m / sqrt(v) = g / |g| after bias
  // correction, eps aside).
  EXPECT_NEAR(g.value("a")->data<float>()[0], 0.9f, 1e-6);
  EXPECT_NEAR(g.value("a")->data<float>()[1], 2.1f, 1e-6);

  // A second optimizer over the same graph keeps the state (as after loading a checkpoint).
  auto again = Optimizer::create(cfg, g, {"a", "b"});
  EXPECT_EQ(g.value("a.step")->data<int64_t>()[0], 1);
}

std::string create_error(const OptimizerConfig& cfg, ir::Graph& g,
                         const std::vector<std::string>& params) {
  try {
    Optimizer::create(cfg, g, params);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(Optimizer, BadConfigsParamsAndGradsNameTheCause) {
  ir::Graph g;
  g.set_value("w", ir::Tensor::from_f32({1, 2}, {2}), ir::Role::kParam);
  g.set_value("stats", ir::Tensor::from_f32({0}, {1}), ir::Role::kBuffer);
  OptimizerConfig cfg;
  EXPECT_NE(create_error(cfg, g, {"nope"}).find("param 'nope' has no value"), std::string::npos);
  EXPECT_NE(create_error(cfg, g, {"stats"}).find("'stats' is a buffer"), std::string::npos);
  EXPECT_NE(create_error(cfg, g, {"w", "w"}).find("listed twice"), std::string::npos);
  cfg.nesterov = true;
  EXPECT_NE(create_error(cfg, g, {"w"}).find("nesterov needs momentum > 0"), std::string::npos);
  cfg = {};
  cfg.kind = "rmsprop";
  EXPECT_NE(create_error(cfg, g, {"w"}).find("unknown optimizer 'rmsprop'"), std::string::npos);
  cfg = {};
  cfg.kind = "adam";
  cfg.beta2 = 1.0;
  EXPECT_NE(create_error(cfg, g, {"w"}).find("beta2 must be in [0, 1)"), std::string::npos);

  cfg = {};
  auto opt = Optimizer::create(cfg, g, {"w"});
  try {
    opt->step(g, {{"w", ir::Tensor::from_f32({1, 2, 3}, {3})}}, 0.1);
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("gradient of 'w' is f32 (3), the param is f32 (2)"),
              std::string::npos)
        << e.what();
  }
}

std::vector<double> lrs(const LrSchedule& s, int n) {
  s.validate();
  std::vector<double> out;
  for (int k = 0; k < n; ++k) out.push_back(s.lr_at(k, 0.1));
  return out;
}

void expect_lrs(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-15) << "step " << i;
}

TEST(LrSchedule, MatchesTorchSchedulers) {
  LrSchedule step;
  step.kind = "step";
  step.step_size = 3;
  step.gamma = 0.5;
  expect_lrs(lrs(step, 12), {0.10000000000000001, 0.10000000000000001, 0.10000000000000001,
                             0.050000000000000003, 0.050000000000000003, 0.050000000000000003,
                             0.025000000000000001, 0.025000000000000001, 0.025000000000000001,
                             0.012500000000000001, 0.012500000000000001, 0.012500000000000001});
  LrSchedule cosine;
  cosine.kind = "cosine";
  cosine.total_steps = 8;
  cosine.min_lr = 0.001;
  expect_lrs(lrs(cosine, 9), {0.10000000000000001, 0.096232036859308701, 0.085501785668734107,
                              0.069442829902071956, 0.050500000000000003, 0.031557170097928057,
                              0.0154982143312659, 0.0047679631406913059, 0.001});
  cosine.warmup_steps = 3;
  cosine.total_steps = 10;
  expect_lrs(lrs(cosine, 12),
             {0, 0.033333333333333333, 0.066666666666666666, 0.10000000000000001,
              0.095097958961169751, 0.081362745192007313, 0.061514786230837559, 0.03948521376916244,
              0.019637254807992693, 0.0059020410388302578, 0.001, 0.001});
  step.warmup_steps = 2;
  expect_lrs(lrs(step, 12), {0, 0.050000000000000003, 0.10000000000000001, 0.10000000000000001,
                             0.10000000000000001, 0.050000000000000003, 0.050000000000000003,
                             0.050000000000000003, 0.025000000000000001, 0.025000000000000001,
                             0.025000000000000001, 0.012500000000000001});
  LrSchedule constant;
  EXPECT_EQ(lrs(constant, 3), (std::vector<double>{0.1, 0.1, 0.1}));

  LrSchedule bad;
  bad.kind = "cosine";
  bad.total_steps = 2;
  bad.warmup_steps = 2;
  EXPECT_THROW(bad.validate(), ModelError);
  bad.kind = "linear";
  EXPECT_THROW(bad.validate(), ModelError);
}

TEST(ClipGradNorm, MatchesTorch) {
  // torch.nn.utils.clip_grad_norm_([a, b], 6.5) with a.grad = (3, 4), b.grad = (12):
  // total 13, a.grad = (1.49999988, 1.99999988), b.grad = (5.99999952).
  std::map<std::string, ir::Tensor> grads = {{"a", ir::Tensor::from_f32({3, 4}, {2})},
                                             {"b", ir::Tensor::from_f32({12}, {1})}};
  EXPECT_DOUBLE_EQ(clip_grad_norm(grads, 6.5), 13.0);
  expect_close(grads["a"].data<float>(), {1.49999988f, 1.99999988f}, "a");
  expect_close(grads["b"].data<float>(), {5.99999952f}, "b");
  // Under the limit: unchanged.
  EXPECT_NEAR(clip_grad_norm(grads, 100), 6.5, 1e-5);
  EXPECT_EQ(grads["b"].data<float>()[0], 5.99999952f);
  // Non-finite: reported, gradients left alone.
  grads["a"].data<float>()[0] = INFINITY;
  EXPECT_TRUE(std::isinf(clip_grad_norm(grads, 1.0)));
  EXPECT_EQ(grads["b"].data<float>()[0], 5.99999952f);
  EXPECT_THROW(clip_grad_norm(grads, 0.0), ModelError);
}

// 1,027 params (vector bodies and a remainder) and three steps' gradients.
struct ManyParams {
  static constexpr int n = 1027;
  std::vector<float> w0 = std::vector<float>(n);
  std::vector<float> grads[3];
  ManyParams() {
    for (int i = 0; i < n; ++i) w0[i] = static_cast<float>(std::sin(0.37 * i));
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < n; ++i) grads[k].push_back(static_cast<float>(std::cos(0.11 * i + k)));
  }
};

// The update loops are vectorized: 1,027 params (vector bodies and a
// remainder, split over threads) against torch.optim.SGD's formula in double.
TEST(Optimizer, SgdOverManyParamsMatchesItsFormulaInDouble) {
  const ManyParams many;
  const int n = ManyParams::n;
  const std::vector<float>& w0 = many.w0;
  const auto& grads = many.grads;
  for (const char* name : {"sgd", "sgd_momentum", "sgd_dampening_wd", "sgd_nesterov_wd"}) {
    const OptimizerConfig cfg = config_for(name);
    ir::Graph g;
    g.set_value("w", ir::Tensor::from_f32(w0, {n}), ir::Role::kParam);
    auto opt = Optimizer::create(cfg, g, {"w"});
    std::vector<double> p(w0.begin(), w0.end()), buf(n, 0.0);
    for (int k = 0; k < 3; ++k) {
      opt->step(g, {{"w", ir::Tensor::from_f32(grads[k], {n})}}, cfg.lr);
      for (int i = 0; i < n; ++i) {
        double d = grads[k][i] + cfg.weight_decay * p[i];
        if (cfg.momentum != 0) {
          buf[i] = k == 0 ? d : buf[i] * cfg.momentum + (1 - cfg.dampening) * d;
          d = cfg.nesterov ? d + cfg.momentum * buf[i] : buf[i];
        }
        p[i] -= cfg.lr * d;
      }
    }
    const float* got = g.value("w")->data<float>();
    for (int i = 0; i < n; ++i)
      ASSERT_NEAR(got[i], p[i], 1e-6 * (std::abs(p[i]) + 1)) << name << " element " << i;
    if (cfg.momentum != 0) {
      const float* b = g.value("w.momentum")->data<float>();
      for (int i = 0; i < n; ++i)
        ASSERT_NEAR(b[i], buf[i], 1e-6 * (std::abs(buf[i]) + 1)) << name << " momentum " << i;
    }
  }
}

// Adam and AdamW over 1,027 params against torch.optim's formulas in
// double, and every optimizer writing into another buffer (as pipeline
// stages keeping weight versions do) bitwise equal to updating in place:
// the loops differ (one pointer or two) but not their arithmetic.
TEST(Optimizer, AdamOverManyParamsAndUpdatesIntoAnotherBuffer) {
  const ManyParams many;
  const int n = ManyParams::n;
  const std::vector<float>& w0 = many.w0;
  const auto& grads = many.grads;
  for (const Case& c : kCases) {
    const OptimizerConfig cfg = config_for(c.name);
    ir::Graph g, h;
    g.set_value("w", ir::Tensor::from_f32(w0, {n}), ir::Role::kParam);
    h.set_value("w", ir::Tensor::from_f32(w0, {n}), ir::Role::kParam);
    auto in_place = Optimizer::create(cfg, g, {"w"});
    auto into = Optimizer::create(cfg, h, {"w"});
    std::vector<double> p(w0.begin(), w0.end()), m(n, 0.0), v(n, 0.0), vmax(n, 0.0);
    for (int k = 0; k < 3; ++k) {
      const ir::Tensor grad = ir::Tensor::from_f32(grads[k], {n});
      in_place->step(g, {{"w", grad}}, cfg.lr);
      const std::map<std::string, ir::Tensor> out = {{"w", ir::Tensor(ir::DType::kF32, {n})}};
      into->step(h, {{"w", grad}}, cfg.lr, &out);
      ASSERT_EQ(h.value("w")->data<float>(), out.at("w").data<float>()) << c.name;
      ASSERT_EQ(std::memcmp(g.value("w")->raw(), h.value("w")->raw(), n * sizeof(float)), 0)
          << c.name << " step " << k;
      if (cfg.kind == "sgd") continue;
      const double t = k + 1, bias1 = 1 - std::pow(cfg.beta1, t),
                   bias2 = 1 - std::pow(cfg.beta2, t);
      for (int i = 0; i < n; ++i) {
        double d = grads[k][i];
        if (cfg.kind == "adamw")
          p[i] *= 1 - cfg.lr * cfg.weight_decay;
        else
          d += cfg.weight_decay * p[i];
        m[i] = cfg.beta1 * m[i] + (1 - cfg.beta1) * d;
        v[i] = cfg.beta2 * v[i] + (1 - cfg.beta2) * d * d;
        vmax[i] = std::max(vmax[i], v[i]);
        const double denom = std::sqrt(cfg.amsgrad ? vmax[i] : v[i]) / std::sqrt(bias2) + cfg.eps;
        p[i] -= cfg.lr / bias1 * m[i] / denom;
      }
    }
    for (const char* state : {"w.momentum", "w.exp_avg", "w.exp_avg_sq", "w.max_exp_avg_sq"}) {
      if (!g.value(state)) continue;
      ASSERT_EQ(std::memcmp(g.value(state)->raw(), h.value(state)->raw(), n * sizeof(float)), 0)
          << c.name << " " << state;
    }
    if (cfg.kind == "sgd") continue;
    const float* got = g.value("w")->data<float>();
    for (int i = 0; i < n; ++i)
      ASSERT_NEAR(got[i], p[i], 1e-6 * (std::abs(p[i]) + 1)) << c.name << " element " << i;
  }
}

}  // namespace
}  // namespace pipetrain::exec
