#include <gtest/gtest.h>

#include "executor/backend.h"
#include "ir/error.h"

namespace pipetrain::exec {
namespace {

TEST(CudaBackend, FactoryIsExplicitWithoutADevice) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  try {
    make_cuda_backend(0);
    FAIL() << "expected the factory to refuse";
  } catch (const RuntimeFault& e) {
    std::string msg = e.what();
    EXPECT_TRUE(msg.find("built without CUDA") != std::string::npos ||
                msg.find("no CUDA device") != std::string::npos)
        << msg;
  }
}

TEST(CudaBackend, CreatesOnAPresentDevice) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto backend = make_cuda_backend(0);
  EXPECT_EQ(backend->name(), "cuda:0");
  EXPECT_THROW(make_cuda_backend(cuda_device_count()), RuntimeFault);
}

}  // namespace
}  // namespace pipetrain::exec
