// TfIdfVectorizer's IDF and TFIDF modes (ONNX's node tests cover only TF):
// weights per pool n-gram, presence for IDF, counts times weights for TFIDF,
// each at its ngram_index, against counts worked out by hand (onnxruntime
// 1.x gives the same three vectors).
#include <gtest/gtest.h>

#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "tests/importer/model_util.h"

namespace pipetrain {
namespace {

std::vector<float> vectorize(const std::string& mode) {
  // Tokens 4 4 9 4 7 9: unigram 4 three times, 9 twice; bigrams (skip <= 1):
  // (4, 9) at 1-2, and with a skip at 0-2 and 3-5: three times; (9, 4) at
  // 2-3: once; (7, 7): never.
  ir::Graph g = test::import_text(R"(<ir_version: 8, opset_import: ["" : 17]>
g (int64[6] x) => (float[6] y) {
  y = TfIdfVectorizer<mode = ")" + mode +
                                  R"(", min_gram_length = 1, max_gram_length = 2,
      max_skip_count = 1, ngram_counts = [0, 2], ngram_indexes = [5, 0, 1, 3, 4],
      pool_int64s = [4, 9, 4, 9, 9, 4, 7, 7], weights = [0.5, 2.0, 3.0, 0.25, 8.0]>(x)
})");
  auto backend = exec::make_cpu_backend();
  auto outs =
      exec::ForwardRunner(g, *backend).run({{"x", ir::Tensor::from_i64({4, 4, 9, 4, 7, 9}, {6})}});
  const ir::Tensor& y = outs.at("y");
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

TEST(TfIdfVectorizer, WeightsInIdfAndTfidfModes) {
  // Output index: 5 <- unigram 4, 0 <- unigram 9, 1 <- (4, 9), 3 <- (9, 4), 4 <- (7, 7); 2 unused.
  EXPECT_EQ(vectorize("TF"), (std::vector<float>{2, 3, 0, 1, 0, 3}));
  EXPECT_EQ(vectorize("IDF"), (std::vector<float>{2.0f, 3.0f, 0, 0.25f, 0, 0.5f}));
  EXPECT_EQ(vectorize("TFIDF"), (std::vector<float>{4.0f, 9.0f, 0, 0.25f, 0, 1.5f}));
}

}  // namespace
}  // namespace pipetrain
