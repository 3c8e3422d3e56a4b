// csv: and jsonl: rows of text: what the loader feeds (framed, padded, masked,
// truncated ids; class labels numbered, or a language model's next tokens), and
// one message per bad file.
#include "data/text_rows.h"

#include <gtest/gtest.h>

#include "data/dataset.h"
#include "ir/error.h"
#include "tests/data/data_test_util.h"

namespace pipetrain::data {
namespace {

using testing::TempDir;
using testing::write_text;

// A WordLevel tokenizer.json with BERT's framing: ids [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3, words 4...
constexpr const char* kTokenizer = R"({
  "added_tokens": [
    {"id": 0, "content": "[PAD]", "special": true, "normalized": false},
    {"id": 2, "content": "[CLS]", "special": true, "normalized": false},
    {"id": 3, "content": "[SEP]", "special": true, "normalized": false}],
  "normalizer": {"type": "Lowercase"},
  "pre_tokenizer": {"type": "WhitespaceSplit"},
  "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
  "model": {"type": "WordLevel", "unk_token": "[UNK]",
            "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "the": 4, "cat": 5,
                      "sat": 6, "on": 7, "mat": 8, ",": 9}}
})";

class TextRowsTest : public ::testing::Test {
 protected:
  void SetUp() override { write_text(dir.file("tok.json"), kTokenizer); }
  DataOptions options(int64_t seq_len = 0) const {
    DataOptions o;
    o.tokenizer = dir.file("tok.json");
    o.seq_len = seq_len;
    o.text_inputs = {"attention_mask", "token_type_ids"};
    return o;
  }
  std::vector<int64_t> row(const ir::Tensor& t, int64_t i) const {
    const int64_t cols = t.shape()[1];
    return {t.data<int64_t>() + i * cols, t.data<int64_t>() + (i + 1) * cols};
  }
  TempDir dir;
};

TEST_F(TextRowsTest, CsvRowsAreFramedPaddedAndMasked) {
  // A quoted field spans a line break and holds a comma and a quote; labels are words.
  write_text(dir.file("d.csv"),
             "id,text,label\r\n"
             "1,The cat,pos\r\n"
             "2,\"the mat , \"\"sat\"\"\non\",neg\n"
             "3,dog,pos\n");
  const Dataset ds = read_text_rows("csv:" + dir.file("d.csv"), options());
  ASSERT_EQ(ds.features.shape(), (ir::Shape{3, 7}));  // the longest: [CLS] + 5 words + [SEP]
  EXPECT_EQ(row(ds.features, 0), (std::vector<int64_t>{2, 4, 5, 3, 0, 0, 0}));
  EXPECT_EQ(row(ds.features, 1),
            (std::vector<int64_t>{2, 4, 8, 9, 1, 7, 3}));  // "sat" quoted: [UNK]
  EXPECT_EQ(row(ds.features, 2), (std::vector<int64_t>{2, 1, 3, 0, 0, 0, 0}));
  EXPECT_EQ(row(ds.inputs.at("attention_mask"), 0), (std::vector<int64_t>{1, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(row(ds.inputs.at("token_type_ids"), 1), (std::vector<int64_t>(7, 0)));
  EXPECT_EQ(ds.num_classes, 2);
  EXPECT_EQ(row(ds.labels.reshaped({1, 3}), 0), (std::vector<int64_t>{1, 0, 1}));  // neg=0 pos=1
}

TEST_F(TextRowsTest, LongTextsAreCutKeepingTheirFrame) {
  write_text(dir.file("d.jsonl"),
             "{\"text\": \"the cat sat on the mat\", \"label\": 2}\n\n"
             "{\"text\": \"cat\", \"label\": 0, \"extra\": [1]}\n");
  DataOptions o = options(5);
  o.text_inputs = {"attention_mask"};  // a model without token_type_ids gets none
  const Dataset ds = read_text_rows("jsonl:" + dir.file("d.jsonl"), o);
  EXPECT_EQ(row(ds.features, 0), (std::vector<int64_t>{2, 4, 5, 6, 3}));
  EXPECT_EQ(row(ds.features, 1), (std::vector<int64_t>{2, 5, 3, 0, 0}));
  EXPECT_EQ(ds.inputs.count("token_type_ids"), 0u);
  EXPECT_EQ(ds.num_classes, 3);  // integer labels are the class ids
}

TEST_F(TextRowsTest, ALanguageModelLearnsEachTextsNextTokens) {
  write_text(dir.file("lm.jsonl"),
             "{\"text\": \"the cat sat\"}\n{\"text\": \"on the mat , the cat\"}\n");
  DataOptions o = options(4);
  o.causal_lm = true;  // no label key needed
  const Dataset ds = read_text_rows("jsonl:" + dir.file("lm.jsonl"), o);
  // Framed: [CLS] the cat sat [SEP]: four inputs, the next token of each.
  EXPECT_EQ(row(ds.features, 0), (std::vector<int64_t>{2, 4, 5, 6}));
  EXPECT_EQ(row(ds.labels, 0), (std::vector<int64_t>{4, 5, 6, 3}));
  EXPECT_EQ(row(ds.features, 1), (std::vector<int64_t>{2, 7, 4, 8}));  // cut at 4
  EXPECT_EQ(row(ds.labels, 1), (std::vector<int64_t>{7, 4, 8, 9}));
  o.seq_len = 6;
  const Dataset padded = read_text_rows("jsonl:" + dir.file("lm.jsonl"), o);
  EXPECT_EQ(row(padded.features, 0), (std::vector<int64_t>{2, 4, 5, 6, 3, 0}));
  EXPECT_EQ(row(padded.labels, 0), (std::vector<int64_t>{4, 5, 6, 3, -100, -100}));
  EXPECT_EQ(row(padded.inputs.at("attention_mask"), 0), (std::vector<int64_t>{1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(padded.num_classes, 10);  // the tokenizer's vocabulary
}

// Sentence pairs: BERT's [CLS] a [SEP] b [SEP] with b's part of type 1, cut longest
// first (a token at a time off the longer text, the second when they are even).
TEST_F(TextRowsTest, SentencePairsAreFramedTypedAndCutLongestFirst) {
  write_text(dir.file("p.csv"),
             "first,second,label\n"
             "the cat,sat,1\n"
             "the cat sat on the mat,on the mat,0\n");
  DataOptions o = options(10);
  o.text_column = "first";
  o.text_pair_column = "second";
  const Dataset ds = read_text_rows("csv:" + dir.file("p.csv"), o);
  EXPECT_EQ(row(ds.features, 0), (std::vector<int64_t>{2, 4, 5, 3, 6, 3, 0, 0, 0, 0}));
  EXPECT_EQ(row(ds.inputs.at("token_type_ids"), 0),
            (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(row(ds.inputs.at("attention_mask"), 0),
            (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 0, 0, 0, 0}));
  // 6 + 3 words in 10 - 3 places: the first text loses two (6 > 3, then 5 > 3) to 4 + 3.
  EXPECT_EQ(row(ds.features, 1), (std::vector<int64_t>{2, 4, 5, 6, 7, 3, 7, 4, 8, 3}));
  EXPECT_EQ(row(ds.inputs.at("token_type_ids"), 1),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1}));
  // The same rows as JSON lines; the second text's key must be there.
  write_text(dir.file("p.jsonl"),
             "{\"first\": \"the cat\", \"second\": \"sat\", \"label\": 1}\n"
             "{\"first\": \"the cat sat on the mat\", \"second\": \"on the mat\", \"label\": 0}\n");
  const Dataset js = read_text_rows("jsonl:" + dir.file("p.jsonl"), o);
  EXPECT_EQ(row(js.features, 1), row(ds.features, 1));
  write_text(dir.file("q.jsonl"), "{\"first\": \"the cat\", \"label\": 1}\n");
  try {
    read_text_rows("jsonl:" + dir.file("q.jsonl"), o);
    FAIL() << "a row without its second text was read";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("no text string 'second' (choose the key with "
                                         "--text-pair-column)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(TextRowsTest, BadFilesNameTheCauseAndTheRow) {
  auto message = [&](const std::string& name, const std::string& text, DataOptions o) {
    write_text(dir.file(name), text);
    const std::string kind = name.substr(name.rfind('.') + 1);
    try {
      read_text_rows(kind + ":" + dir.file(name), o);
    } catch (const ModelError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("a.csv", "text,label\n\"open,1\n", options()).find("never closed"),
            std::string::npos);
  EXPECT_NE(message("b.csv", "txt,label\nthe,1\n", options()).find("no text column 'text'"),
            std::string::npos);
  EXPECT_NE(message("c.csv", "text,label\nthe,1\ncat,1,extra\n", options())
                .find("the row on line 3 has 3 fields, the header 2"),
            std::string::npos);
  EXPECT_NE(message("d.csv", "text,label\n", options()).find("no rows below the header"),
            std::string::npos);
  EXPECT_NE(message("e.jsonl", "{\"text\": \"a\", \"label\": 1}\n{\"text\": \"b\"\n", options())
                .find("line 2 is not JSON"),
            std::string::npos);
  EXPECT_NE(message("f.jsonl", "{\"text\": \"a\", \"label\": 1.5}\n", options())
                .find("the label 'label' is number, not a class name or an integer"),
            std::string::npos);
  EXPECT_NE(message("g.jsonl", "{\"text\": \"a\", \"class\": 1}\n", options())
                .find("line 1 has no label 'label'"),
            std::string::npos);
  EXPECT_NE(message("h.csv", "text,label\nthe,1\n", options(2)).find("leaves no room for text"),
            std::string::npos);
}

TEST_F(TextRowsTest, LoadDataSplitsItStratified) {
  std::string csv = "text,label\n";
  for (int i = 0; i < 20; ++i)
    csv += std::string(i % 2 ? "the cat" : "on the mat") + "," + (i % 2 ? "a" : "b") + "\n";
  write_text(dir.file("s.csv"), csv);
  DataOptions o = options();
  o.test_fraction = 0.2;
  const DataSplit s = load_data("csv:" + dir.file("s.csv"), o);
  EXPECT_EQ(s.train.size(), 16);
  EXPECT_EQ(s.test.size(), 4);
  EXPECT_EQ(s.test.inputs.at("attention_mask").shape(), (ir::Shape{4, 5}));
}

}  // namespace
}  // namespace pipetrain::data
