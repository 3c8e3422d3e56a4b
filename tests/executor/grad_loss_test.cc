// SoftmaxCrossEntropyLossGrad and NegativeLogLikelihoodLossGrad against
// PyTorch autograd (values pasted), and against central differences of our
// own forward losses. Generator, per case:
//   x = torch.tensor(wave(shape, 0.2, 2.0), dtype=float64, requires_grad=True)
//   l = F.cross_entropy or F.nll_loss(x, labels, weight=w, ignore_index=i, reduction=r)
//   l.backward(wave(l.shape, 1.0) if r == 'none' else 0.75); x.grad
#include <gtest/gtest.h>

#include "ir/error.h"
#include "tests/executor/nn_test_util.h"

namespace pipetrain::test {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;
using Ints = std::vector<int64_t>;
using Attrs = std::map<std::string, ir::Attribute>;

struct LossCase {
  Shape scores;
  Ints labels;
  std::string reduction;
  std::vector<float> weights;  // empty: none
  int64_t ignore = -100;       // PyTorch's default (no label equals it)
};

Tensor labels_of(const LossCase& c, DType t = DType::kI64) {
  Shape s = c.scores;
  s.erase(s.begin() + 1);
  Tensor l = Tensor::from_i64(c.labels, s);
  if (t == DType::kI64) return l;
  Tensor l32(DType::kI32, s);
  for (int64_t i = 0; i < l.numel(); ++i)
    l32.data<int32_t>()[i] = static_cast<int32_t>(c.labels[static_cast<size_t>(i)]);
  return l32;
}

Attrs attrs_of(const LossCase& c) {
  return {{"reduction", c.reduction}, {"ignore_index", c.ignore}};
}

/// The upstream gradient: 0.75 for sum/mean, wave(loss shape, 1.0) for none.
Tensor dloss_of(const LossCase& c) {
  if (c.reduction != "none") return Tensor::scalar_f32(0.75f);
  Shape s = c.scores;
  s.erase(s.begin() + 1);
  return wave(s, 1.0);
}

Tensor loss_grad(const std::string& op, const LossCase& c, const Tensor& scores,
                 DType label_type = DType::kI64) {
  std::vector<OpInput> ins = {in(dloss_of(c)), in(scores), in(labels_of(c, label_type))};
  if (!c.weights.empty())
    ins.push_back(in(Tensor::from_f32(c.weights, {static_cast<int64_t>(c.weights.size())})));
  return run_op(op + "Grad", ins, attrs_of(c))[0];
}

const LossCase kMean2d = {{3, 4}, {1, 0, 3}, "mean", {}, -100};
const LossCase kMeanWeighted = {{2, 3, 2, 2}, {1, 0, 2, 2, 1, 1, 0, 2}, "mean", {0.5f, 2, 1.5f}, 1};
const LossCase kSumWeighted = {
    {2, 3, 2, 2}, {1, 0, 2, 2, 1, 1, 0, 2}, "sum", {0.5f, 2, 1.5f}, -100};
const LossCase kNone = {{2, 3, 3}, {2, 0, 1, 1, 2, 0}, "none", {}, 0};

TEST(SoftmaxCrossEntropyLossGrad, MatchesTorch) {
  auto check = [](const LossCase& c, const std::vector<float>& want) {
    SCOPED_TRACE(ir::shape_str(c.scores) + " " + c.reduction);
    expect_close(loss_grad("SoftmaxCrossEntropyLoss", c, wave(c.scores, 0.2, 2.0)), want);
    expect_close(loss_grad("SoftmaxCrossEntropyLoss", c, wave(c.scores, 0.2, 2.0), DType::kI32),
                 want);
  };
  check(kMean2d, {0.02272971f, -0.2050479f, 0.07681888f, 0.1054993f, -0.153619f, 0.07786275f,
                  0.04947093f, 0.0262853f, 0.130286f, 0.06337788f, 0.03415853f, -0.2278224f});
  // Weights and ignore_index 1: mean divides by the weights of labels not ignored.
  check(kMeanWeighted, {0,
                        -0.04663241f,
                        0.113917f,
                        0.1558908f,
                        0,
                        0.04319865f,
                        0.08490358f,
                        0.04495099f,
                        0,
                        0.003433756f,
                        -0.1988206f,
                        -0.2008418f,
                        0,
                        0,
                        -0.06661464f,
                        0.008097443f,
                        0,
                        0,
                        0.02243434f,
                        0.1134343f,
                        0,
                        0,
                        0.0441803f,
                        -0.1215317f});
  check(kSumWeighted,
        {0.2288249f,  -0.2564782f, 0.6265435f,  0.8573994f,  -0.3770609f, 0.2375926f,
         0.4669697f,  0.2472304f,  0.148236f,   0.01888566f, -1.093513f,  -1.10463f,
         0.02620137f, 0.02477746f, -0.3663805f, 0.04453594f, -1.360836f,  -1.247174f,
         0.1233889f,  0.6238885f,  1.334635f,   1.222397f,   0.2429917f,  -0.6684245f});
  check(kNone, {0.1031167f, 0, 0.4168419f, 0.4786132f, 0, -0.4967421f, -0.5817299f, 0, 0.07990019f,
                0.416182f, 0.1382433f, 0, -0.7373596f, 0.08083966f, 0, 0.3211776f, -0.2190829f, 0});
}

TEST(NegativeLogLikelihoodLossGrad, MatchesTorch) {
  auto check = [](const LossCase& c, const std::vector<float>& want) {
    SCOPED_TRACE(ir::shape_str(c.scores) + " " + c.reduction);
    expect_close(loss_grad("NegativeLogLikelihoodLoss", c, wave(c.scores, 0.2, 2.0)), want);
    expect_close(loss_grad("NegativeLogLikelihoodLoss", c, wave(c.scores, 0.2, 2.0), DType::kI32),
                 want);
  };
  check(kMean2d, {0, -0.25f, 0, 0, -0.25f, 0, 0, 0, 0, 0, 0, -0.25f});
  check(kMeanWeighted, {0, -0.06818182f, 0, 0, 0, 0, 0, 0, 0, 0, -0.2045455f, -0.2045455f, 0,
                        0, -0.06818182f, 0, 0, 0, 0, 0, 0, 0, 0, -0.2045455f});
  check(kSumWeighted, {0, -0.375f, 0,       0, -1.5f, 0,     0, 0, 0, 0, -1.125f, -1.125f,
                       0, 0,       -0.375f, 0, -1.5f, -1.5f, 0, 0, 0, 0, 0,       -1.125f});
  check(kNone, {0, 0, 0, 0, 0, -0.9857192f, -0.841471f, 0, 0, 0, 0, 0, -0.8581178f, 0, 0, 0,
                -0.6143743f, 0});
}

TEST(LossGrads, MatchCentralDifferencesOfTheForward) {
  // d(sum dloss * loss) / dscores by central differences of our forward loss
  // (f32, step 1e-2: truncation ~1e-5 for these smooth losses, rounding ~1e-5).
  for (const char* op : {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"})
    for (const LossCase& c : {kMean2d, kMeanWeighted, kSumWeighted, kNone}) {
      SCOPED_TRACE(std::string(op) + " " + ir::shape_str(c.scores) + " " + c.reduction);
      Tensor x = wave(c.scores, 0.2, 2.0);
      Tensor dloss = dloss_of(c);
      auto objective = [&](const Tensor& s) {
        std::vector<OpInput> ins = {in(s), in(labels_of(c))};
        if (!c.weights.empty())
          ins.push_back(in(Tensor::from_f32(c.weights, {static_cast<int64_t>(c.weights.size())})));
        Tensor l = run_op(op, ins, attrs_of(c))[0];
        double v = 0;
        for (int64_t i = 0; i < l.numel(); ++i) v += dloss.at(i) * l.at(i);
        return v;
      };
      Tensor want(DType::kF32, c.scores);
      const float h = 1e-2f;
      for (int64_t i = 0; i < x.numel(); ++i) {
        Tensor xp = x.clone(), xm = x.clone();
        xp.data<float>()[i] += h;
        xm.data<float>()[i] -= h;
        want.data<float>()[i] = static_cast<float>((objective(xp) - objective(xm)) / (2.0 * h));
      }
      expect_close(loss_grad(op, c, x), want, 1e-3, 2e-4);
    }
}

TEST(LossGrads, AllLabelsIgnoredGiveZero) {
  // The forward mean is 0 / 0 = NaN; PyTorch's gradient is 0 everywhere.
  const LossCase c = {{2, 3}, {2, 2}, "mean", {}, 2};
  for (const char* op : {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"})
    expect_close(loss_grad(op, c, wave(c.scores)), {0, 0, 0, 0, 0, 0}, 0, 0);
}

TEST(LossGrads, LabelOutOfRangeIsARuntimeFault) {
  const LossCase c = {{2, 3}, {1, 3}, "sum", {}, -100};
  for (const char* op : {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"})
    EXPECT_THROW(loss_grad(op, c, wave(c.scores)), RuntimeFault);
}

}  // namespace
}  // namespace pipetrain::test
