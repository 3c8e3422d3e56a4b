// The kernel check's verdict kept between processes (executor/kernel_check_cache.h):
// a stored verdict comes back whole with its decisions in force, a verdict for
// another setup or a damaged file is never used, and the key follows what the
// verdict depends on.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "executor/cpu/kernels/kernel_paths.h"
#include "executor/kernel_check.h"
#include "executor/kernel_check_cache.h"

namespace pipetrain::test {
namespace {

namespace fs = std::filesystem;
using exec::KernelCheckReport;
namespace cpu = exec::cpu;

struct Decisions {
  std::vector<bool> paths;
  cpu::AvoidedOps ops;
};

Decisions decisions() {
  Decisions d;
  for (int i = 0; i < cpu::kKernelPathCount; ++i)
    d.paths.push_back(cpu::path_avoided(static_cast<cpu::KernelPath>(i)));
  d.ops = cpu::avoided_ops();
  return d;
}

void expect_same(const Decisions& a, const Decisions& b) {
  EXPECT_EQ(a.paths, b.paths);
  EXPECT_EQ(a.ops.everywhere, b.ops.everywhere);
  EXPECT_EQ(a.ops.blocked, b.ops.blocked);
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Sets a variable for the test's length; the old value comes back at its end.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class KernelCheckCache : public ::testing::Test {
 protected:
  void SetUp() override {
    exec::ensure_kernel_check();  // the process's own verdict first, as a backend would
    dir_ = fs::temp_directory_path() / ("kernel_check_cache_test." + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    cpu::set_injected_faults("");
    cpu::clear_avoided();
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

// Faults in a GEMM library, a blocked-only op and an op avoided everywhere: the
// restored report equals the stored one field by field and its decisions replace
// whatever was in force.
TEST_F(KernelCheckCache, StoredVerdictComesBackWithItsDecisions) {
  cpu::set_injected_faults("openblas-gemm,MaxPoolGrad:blocked,BatchNormalizationGrad");
  const KernelCheckReport stored = exec::run_kernel_check();
  const Decisions want = decisions();
  ASSERT_TRUE(want.paths[static_cast<int>(cpu::KernelPath::kOpenBlasGemm)]);
  ASSERT_EQ(want.ops.everywhere.count("BatchNormalizationGrad"), 1u);
  const std::string file = (dir_ / "verdict.json").string();
  ASSERT_TRUE(exec::store_kernel_check(file, "k1", stored));

  cpu::set_injected_faults("");
  cpu::clear_avoided();
  cpu::avoid_op("Conv", false);  // in force before: the restore replaces it
  const auto got = exec::restore_kernel_check(file, "k1");
  ASSERT_TRUE(got.has_value());
  expect_same(decisions(), want);
  ASSERT_EQ(got->families.size(), stored.families.size());
  EXPECT_EQ(got->seconds, stored.seconds);
  for (size_t i = 0; i < stored.families.size(); ++i) {
    const auto &a = got->families[i], &b = stored.families[i];
    SCOPED_TRACE(b.path);
    EXPECT_EQ(a.family, b.family);
    EXPECT_EQ(a.path, b.path);
    EXPECT_EQ(a.cases, b.cases);
    EXPECT_EQ(a.worst, b.worst);  // bitwise: JSON keeps doubles exactly
    EXPECT_EQ(a.worst_case, b.worst_case);
    EXPECT_EQ(a.skipped, b.skipped);
    EXPECT_EQ(a.skip_reason, b.skip_reason);
    EXPECT_EQ(a.avoided, b.avoided);
    EXPECT_EQ(a.fallback, b.fallback);
    EXPECT_EQ(a.fallback_worst, b.fallback_worst);
    EXPECT_EQ(a.seconds, b.seconds);
  }
  EXPECT_EQ(exec::avoided_notice(got->families[0]), exec::avoided_notice(stored.families[0]));
}

// Another key, a missing file, a file cut short, an unknown path: nothing is
// restored and the decisions in force stay as they were.
TEST_F(KernelCheckCache, AnotherSetupOrADamagedFileIsNeverUsed) {
  cpu::set_injected_faults("onednn-gemm");
  const KernelCheckReport stored = exec::run_kernel_check();
  const std::string file = (dir_ / "verdict.json").string();
  ASSERT_TRUE(exec::store_kernel_check(file, "k1", stored));
  cpu::set_injected_faults("");
  cpu::clear_avoided();
  cpu::avoid_op("Conv", true);
  const Decisions before = decisions();

  EXPECT_FALSE(exec::restore_kernel_check(file, "k2").has_value());
  EXPECT_FALSE(exec::restore_kernel_check((dir_ / "missing.json").string(), "k1").has_value());
  EXPECT_FALSE(exec::restore_kernel_check("", "k1").has_value());
  const std::string text = read(file);
  const fs::path cut = dir_ / "cut.json";
  std::ofstream(cut) << text.substr(0, text.size() / 2);
  EXPECT_FALSE(exec::restore_kernel_check(cut.string(), "k1").has_value());
  std::string renamed = text;
  const size_t at = renamed.find("\"onednn-gemm\"", renamed.find("avoided_paths"));
  ASSERT_NE(at, std::string::npos);
  renamed.replace(at, 13, "\"no-such-path\"");
  const fs::path unknown = dir_ / "unknown.json";
  std::ofstream(unknown) << renamed;
  EXPECT_FALSE(exec::restore_kernel_check(unknown.string(), "k1").has_value());
  expect_same(decisions(), before);
  EXPECT_TRUE(exec::restore_kernel_check(file, "k1").has_value());  // the intact one still does
}

// Stable within a setup; a variable that steers the kernels (OPENBLAS_CORETYPE) is a
// new key, and unsetting it brings the old one back.
TEST_F(KernelCheckCache, KeyFollowsTheSteeringVariables) {
  ScopedEnv coretype("OPENBLAS_CORETYPE", nullptr);
  const std::string key = exec::kernel_check_key();
  EXPECT_EQ(key.size(), 32u);
  EXPECT_EQ(exec::kernel_check_key(), key);
  ::setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  EXPECT_NE(exec::kernel_check_key(), key);
  ::unsetenv("OPENBLAS_CORETYPE");
  EXPECT_EQ(exec::kernel_check_key(), key);
}

TEST_F(KernelCheckCache, FileIsWhereTheVariablesSay) {
  ScopedEnv dir("PIPETRAIN_CACHE_DIR", nullptr), xdg("XDG_CACHE_HOME", nullptr),
      home("HOME", nullptr), off("PIPETRAIN_KERNEL_CHECK_CACHE", nullptr);
  ::setenv("PIPETRAIN_CACHE_DIR", "/some/dir", 1);
  EXPECT_EQ(exec::kernel_check_cache_file("abc"), "/some/dir/kernel-check-abc.json");
  ::unsetenv("PIPETRAIN_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(exec::kernel_check_cache_file("abc"), "/xdg/pipetrain/kernel-check-abc.json");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(exec::kernel_check_cache_file("abc"), "/home/u/.cache/pipetrain/kernel-check-abc.json");
  ::setenv("PIPETRAIN_KERNEL_CHECK_CACHE", "off", 1);
  EXPECT_EQ(exec::kernel_check_cache_file("abc"), "");
  ::unsetenv("PIPETRAIN_KERNEL_CHECK_CACHE");
  ::unsetenv("HOME");
  EXPECT_EQ(exec::kernel_check_cache_file("abc"), "");  // nowhere known: the check runs
}

// A directory that cannot be made: false, nothing written, no exception.
TEST_F(KernelCheckCache, UnwritableDirectoryIsReportedNotThrown) {
  const KernelCheckReport r = exec::run_kernel_check();
  const fs::path blocker = dir_ / "a-file";
  std::ofstream(blocker) << "x";
  EXPECT_FALSE(exec::store_kernel_check((blocker / "verdict.json").string(), "k", r));
  EXPECT_FALSE(exec::store_kernel_check("", "k", r));
}

}  // namespace
}  // namespace pipetrain::test
