// Every gradient rule against central finite differences, over the table of
// shapes, broadcasts and attributes in grad_cases.h. A failure prints the
// case, its seed and the worst element.
#include "tests/autodiff/grad_cases.h"

namespace pipetrain::test {

// Names the case in gtest's messages instead of dumping its bytes.
void PrintTo(const GradCase& c, std::ostream* os) {
  *os << c.name;
}

namespace {

class GradientCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(GradientCheck, MatchesFiniteDifferences) {
  const GradCase& c = GetParam();
  const uint64_t seed = std::hash<std::string>{}(c.name) % 100000;
  GradCheckResult r = check_gradients(c, seed);
  EXPECT_LE(r.worst, 1.0) << c.name << " (seed " << seed << "): worst element " << r.where;
}

INSTANTIATE_TEST_SUITE_P(AllRules, GradientCheck, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) { return info.param.name; });

// Every differentiable op of the list is covered by the table.
TEST(GradientCheck, TableCoversEveryDifferentiableOp) {
  std::set<std::string> covered;
  for (const auto& c : all_cases()) covered.insert(c.op);
  for (const auto& [op, schema] : ir::OpRegistry::instance().all())
    if (schema.differentiable && !schema.internal) {
      EXPECT_TRUE(covered.count(op)) << op << " has no finite-difference case";
    }
}

}  // namespace
}  // namespace pipetrain::test
