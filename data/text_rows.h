// Rows of text: `csv:FILE` (a header row, RFC 4180 quoting, fields may span
// lines) or `jsonl:FILE` (one JSON object per line). Each row's text is
// tokenized, framed with the tokenizer's special tokens, truncated and padded
// to one length, and fed as the token ids (features, the model's first free
// input) with attention_mask and token_type_ids by name where the model takes
// them. With a pair column each row is a sentence pair, framed as the tokenizer
// frames pairs (BERT's [CLS] a [SEP] b [SEP]) and truncated longest first, its
// token_type_ids the tokenizer's. The labels are each row's class (sequence
// classification), or, for a causal language model, the next tokens with
// ignore_index on the padding.
#pragma once

#include <string>

#include "data/dataset.h"

namespace pipetrain::data {

/// The rows of `source` ("csv:FILE" or "jsonl:FILE") as one dataset: features (N, T) i64 ids
/// padded with the tokenizer's pad id, inputs["attention_mask"] and inputs["token_type_ids"]
/// (N, T) i64 for the names in options.text_inputs, and labels: (N) i64 class ids (integers as
/// given, words numbered in sorted order), or with options.causal_lm (N, T) next-token ids,
/// options.ignore_index where no next token is (no label column then). T is
/// options.seq_len, or the longest text when 0. ModelError naming the file and the row for a
/// missing column or key, a row of the wrong width, a label that is neither, or an empty file.
Dataset read_text_rows(const std::string& source, const DataOptions& options);

/// True for the sources read_text_rows takes.
bool is_text_rows(const std::string& source);

}  // namespace pipetrain::data
