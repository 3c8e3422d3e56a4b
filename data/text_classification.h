// Sequence classification from text: `csv:FILE` (a header row, RFC 4180
// quoting, fields may span lines) or `jsonl:FILE` (one JSON object per line),
// each row a text and a label. Texts are tokenized, framed with the
// tokenizer's special tokens, truncated and padded to one length, and fed as
// the token ids (features, the model's first free input) with attention_mask
// and token_type_ids by name where the model takes them.
#pragma once

#include <string>

#include "data/dataset.h"

namespace pipetrain::data {

/// The rows of `source` ("csv:FILE" or "jsonl:FILE") as one dataset: features (N, T) i64 ids
/// padded with the tokenizer's pad id, inputs["attention_mask"] and inputs["token_type_ids"]
/// (N, T) i64 for the names in options.text_inputs, labels (N) i64 class ids (integers as
/// given, words numbered in sorted order). T is options.seq_len, or the longest text when 0.
/// ModelError naming the file and the row for a missing column or key, a row of the wrong
/// width, a label that is neither, or an empty file.
Dataset read_text_classification(const std::string& source, const DataOptions& options);

/// True for the sources read_text_classification takes.
bool is_text_classification(const std::string& source);

}  // namespace pipetrain::data
