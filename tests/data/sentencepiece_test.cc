// SentencePiece through pipetrain's module: a model trained here round-trips
// text with its line breaks, the vocabulary is the one asked for, the same
// seed gives the same model, and bad paths fail with the file named.
#include "data/sentencepiece.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/text.h"
#include "data/tokenizer.h"
#include "ir/error.h"
#include "tests/data/data_test_util.h"

namespace pipetrain::data {
namespace {

using testing::TempDir;
using testing::write_text;

// A few hundred lines of varied English-like text.
std::string corpus() {
  const char* subjects[] = {"the cat", "a dog", "my neighbour", "the old sailor", "every child"};
  const char* verbs[] = {"sees", "remembers", "paints", "forgets", "carries"};
  const char* objects[] = {"the moon", "a red boat", "seven apples", "the quiet river", "music"};
  std::ostringstream s;
  for (int i = 0; i < 400; ++i)
    s << subjects[i % 5] << ' ' << verbs[(i / 5) % 5] << ' ' << objects[(i / 25) % 5]
      << (i % 3 ? ".\n" : ", and then sleeps.\n");
  return s.str();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(SentencePiece, TrainsAModelThatRoundTripsTextWithLineBreaks) {
  TempDir dir;
  SentencePieceOptions o;
  o.vocab_size = 50;
  train_sentencepiece(corpus(), dir.file("tok.model"), o);
  ASSERT_TRUE(std::filesystem::exists(dir.file("tok.model")));
  // Only the model: no .vocab, no temporary files beside it.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);

  const auto tok = make_tokenizer(dir.file("tok.model"));
  EXPECT_EQ(tok->vocab_size(), 50);
  const std::string text = "the cat paints music.\n\na dog remembers the moon\nsailor";
  const auto ids = tok->encode(text);
  EXPECT_LT(ids.size(), text.size());  // subwords, not bytes
  for (const int64_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 50);
  }
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_NE(error_of([&] { tok->decode({50}); }).find("outside the vocabulary [0, 50)"),
            std::string::npos);
}

TEST(SentencePiece, SameSeedSameModel) {
  TempDir dir;
  SentencePieceOptions o;
  o.vocab_size = 40;
  o.seed = 7;
  train_sentencepiece(corpus(), dir.file("a.model"), o);
  train_sentencepiece(corpus(), dir.file("b.model"), o);
  auto bytes = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  EXPECT_EQ(bytes(dir.file("a.model")), bytes(dir.file("b.model")));
}

TEST(SentencePiece, TextDataUsesTheTokenizer) {
  TempDir dir;
  write_text(dir.file("corpus.txt"), corpus());
  SentencePieceOptions so;
  so.vocab_size = 45;
  train_sentencepiece(corpus(), dir.file("tok.model"), so);
  DataOptions o;
  o.seq_len = 8;
  o.test_fraction = 0.1;
  o.tokenizer = dir.file("tok.model");
  const TokenWindows w = text_windows(dir.file("corpus.txt"), o);
  EXPECT_EQ(w.vocab, 45);
  EXPECT_EQ(w.split.train.num_classes, 45);
  const auto stream = make_tokenizer(o.tokenizer)->encode(corpus());
  EXPECT_EQ(w.tokens, static_cast<int64_t>(stream.size()));
  // Window 0's features are the stream's first 8 ids, its labels the next ones.
  const auto f = w.split.train.features.to_i64(), l = w.split.train.labels.to_i64();
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(f[i], stream[i]);
    EXPECT_EQ(l[i], stream[i + 1]);
  }
}

TEST(SentencePiece, BadInputsNameTheCause) {
  TempDir dir;
  write_text(dir.file("junk.model"), "not a model");
  EXPECT_NE(error_of([&] {
              make_tokenizer(dir.file("junk.model"));
            }).find("junk.model: not a SentencePiece model"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              make_tokenizer(dir.file("missing.model"));
            }).find("missing.model: no such SentencePiece model file"),
            std::string::npos);
  SentencePieceOptions o;
  EXPECT_NE(error_of([&] {
              train_sentencepiece(corpus(), dir.file("tok.bin"), o);
            }).find("must end in .model"),
            std::string::npos);
  o.vocab_size = 100000;  // more pieces than this text has
  EXPECT_NE(error_of([&] {
              train_sentencepiece(corpus(), dir.file("big.model"), o);
            }).find("Vocabulary size too high"),
            std::string::npos);
  // Nothing half-written: the junk file is all the directory holds.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

}  // namespace
}  // namespace pipetrain::data
