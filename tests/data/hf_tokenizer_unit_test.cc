// tokenizer.json pipelines on tiny hand-made files whose ids can be worked out
// by hand: BPE merges by rank with byte-level pre-tokenization, WordPiece with
// BERT's normalizer and framing, Unigram's Viterbi with unknowns fused, added
// tokens matched before normalization, decoders back to text, and one message
// per bad file. (tests/data/hf_tokenizer_test.py checks real tokenizers
// against the tokenizers library itself.)
#include "data/hf_tokenizer.h"

#include <gtest/gtest.h>

#include "ir/error.h"
#include "tests/data/data_test_util.h"

namespace pipetrain::data {
namespace {

using testing::TempDir;
using testing::write_text;
using Ids = std::vector<int64_t>;

class HfTokenizerUnit : public ::testing::Test {
 protected:
  std::unique_ptr<Tokenizer> load(const std::string& json) {
    const std::string path = dir.file("t" + std::to_string(n++) + ".json");
    write_text(path, json);
    return load_hf_tokenizer(path);
  }
  std::string error_of(const std::string& json) {
    try {
      load(json);
    } catch (const ModelError& e) {
      return e.what();
    }
    return "no error";
  }
  TempDir dir;
  int n = 0;
};

// "Ġ" is the space byte's character in GPT-2's byte table.
constexpr const char* kByteLevelBpe = R"({
  "added_tokens": [{"id": 9, "content": "<|end|>", "special": true, "normalized": false}],
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "Ġ": 3, "ab": 4, "abc": 5,
                                     "Ġa": 6, "Ġab": 7, "bc": 8},
            "merges": ["Ġ a", "a b", "ab c", "Ġa b", "b c"]}
})";

TEST_F(HfTokenizerUnit, BytePairsMergeByRankAfterByteLevelSplitting) {
  const auto t = load(kByteLevelBpe);
  // "abc": a b -> ab (rank 1) before b c (rank 4), then ab c -> abc.
  EXPECT_EQ(t->encode("abc"), (Ids{5}));
  // " ab" is one word with its space: Ġ a (rank 0) before a b, then Ġa b -> Ġab; " bc"
  // has no Ġ b, so it is Ġ and bc.
  EXPECT_EQ(t->encode("abc ab bc"), (Ids{5, 7, 3, 8}));
  // The special token is split out before anything else, and left out of decode.
  EXPECT_EQ(t->encode("ab<|end|>c"), (Ids{4, 9, 2}));
  EXPECT_EQ(t->decode(Ids{5, 7, 9, 3, 8}), "abc ab bc");
  EXPECT_EQ(t->vocab_size(), 10);
  EXPECT_THROW(t->decode(Ids{10}), ModelError);
}

constexpr const char* kWordPiece = R"({
  "added_tokens": [
    {"id": 0, "content": "[PAD]", "special": true, "normalized": false},
    {"id": 2, "content": "[CLS]", "special": true, "normalized": false},
    {"id": 3, "content": "[SEP]", "special": true, "normalized": false}],
  "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                 "strip_accents": null, "lowercase": true},
  "pre_tokenizer": {"type": "BertPreTokenizer"},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
               {"Sequence": {"id": "A", "type_id": 0}},
               {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
    "pair": [],
    "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                       "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
  "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
  "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "cafe": 4, "run": 5,
                      "##ning": 6, "!": 7, "中": 8}}
})";

TEST_F(HfTokenizerUnit, WordPieceAfterBertNormalization) {
  const auto t = load(kWordPiece);
  // Accents stripped and lowercased ("Café" -> "cafe"), punctuation split off, the
  // longest prefix first ("running" -> run ##ning), CJK padded into words of its own,
  // control characters dropped, unknown words whole.
  EXPECT_EQ(t->encode("Café RUNNING!中x\x01"), (Ids{4, 5, 6, 7, 8, 1}));
  EXPECT_EQ(t->encode_with_special_tokens("run"), (Ids{2, 5, 3}));
  EXPECT_EQ(t->pad_id(), 0);
  EXPECT_EQ(t->decode(Ids{2, 5, 6, 7, 3}), "running!");
}

constexpr const char* kUnigram = R"({
  "normalizer": {"type": "Sequence", "normalizers": [
      {"type": "NFKC"}, {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
  "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "add_prefix_space": true},
  "decoder": {"type": "Metaspace", "replacement": "▁", "add_prefix_space": true},
  "model": {"type": "Unigram", "unk_id": 0,
            "vocab": [["<unk>", 0.0], ["▁", -2.0], ["▁ab", -1.0], ["a", -3.0], ["b", -3.0],
                      ["▁a", -2.5], ["c", -1.5]]}
})";

// Pairs as the library frames them: RoBERTa's <s> a </s></s> b </s> all of type 0,
// a template's pieces with their type ids, a template without a pair as a then b.
TEST_F(HfTokenizerUnit, PairsAreFramedByTheirPostProcessor) {
  std::string roberta = kWordPiece;
  const size_t at = roberta.find("\"post_processor\"");
  const size_t end = roberta.find("\"decoder\"");
  roberta.replace(at, end - at,
                  R"("post_processor": {"type": "RobertaProcessing", "sep": ["[SEP]", 3],
                                        "cls": ["[CLS]", 2]},
  )");
  const auto r = load(roberta);
  const FramedPair rp = r->frame_pair({5}, {4, 7});
  EXPECT_EQ(rp.ids, (Ids{2, 5, 3, 3, 4, 7, 3}));
  EXPECT_EQ(rp.type_ids, (Ids(7, 0)));
  std::string paired = kWordPiece;
  paired.replace(paired.find("\"pair\": []"), 10,
                 R"("pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                             {"Sequence": {"id": "A", "type_id": 0}},
                             {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                             {"Sequence": {"id": "B", "type_id": 1}},
                             {"SpecialToken": {"id": "[SEP]", "type_id": 1}}])");
  const FramedPair tp = load(paired)->frame_pair({5, 6}, {4});
  EXPECT_EQ(tp.ids, (Ids{2, 5, 6, 3, 4, 3}));
  EXPECT_EQ(tp.type_ids, (Ids{0, 0, 0, 0, 1, 1}));
  std::string single_only = kWordPiece;
  single_only.replace(single_only.find("\"pair\": [],"), 11, "");
  const FramedPair sp = load(single_only)->frame_pair({5, 6}, {4});
  EXPECT_EQ(sp.ids, (Ids{5, 6, 4}));
  EXPECT_EQ(sp.type_ids, (Ids{0, 0, 1}));
}

TEST_F(HfTokenizerUnit, UnigramTakesTheBestScoringSegmentation) {
  const auto t = load(kUnigram);
  // "▁ab" (-1) beats "▁a" + "b" (-5.5) and "▁" + "a" + "b" (-8); fullwidth "ａｂ" is
  // NFKC's "ab"; two spaces become one; "xy" is one fused unknown.
  EXPECT_EQ(t->encode("ａｂ  abc xy"), (Ids{2, 2, 6, 1, 0}));
  EXPECT_EQ(t->decode(Ids{2, 2, 6}), "ab abc");
}

TEST_F(HfTokenizerUnit, BadFilesNameThePart) {
  EXPECT_NE(error_of("{\"model\": ").find("not a valid tokenizer.json"), std::string::npos);
  EXPECT_NE(error_of("{}").find("no \"model\""), std::string::npos);
  std::string bad = kUnigram;
  bad.replace(bad.find("\"Metaspace\", \"replacement\""), 11, "\"Scripts\"");
  EXPECT_NE(error_of(bad).find("unsupported pre_tokenizer 'Scripts'"), std::string::npos);
  std::string merge = kByteLevelBpe;
  merge.replace(merge.find("\"b c\""), 5, "\"b q\"");
  EXPECT_NE(error_of(merge).find("BPE merge 4 ('b q'): the token 'q' is not in the vocabulary"),
            std::string::npos);
}

}  // namespace
}  // namespace pipetrain::data
