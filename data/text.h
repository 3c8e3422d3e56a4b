// Language-model data: a token stream (tokenized text, or pre-tokenized ids)
// cut into windows of seq_len tokens whose labels are the next tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace pipetrain::data {

struct TokenWindows {
  DataSplit split;     // features (N, T) i64 token ids, labels (N, T) i64 next tokens
  int64_t tokens = 0;  // in the stream
  int64_t vocab = 0;   // the tokenizer's (text) or max id + 1 (token files)
};

/// Non-overlapping windows: window i is stream[i T, i T + T) with labels
/// stream[i T + 1, i T + T + 1). The last round(N test_fraction) windows are
/// the test split (held-out text follows the training text, so no window of
/// one split overlaps the other). ModelError when the stream is empty or too
/// short for one training window.
TokenWindows window_stream(const std::vector<int64_t>& stream, int64_t seq_len,
                           double test_fraction, int64_t vocab, const std::string& what);

/// `text:PATH`: UTF-8 files tokenized by options.tokenizer (bytes when empty).
TokenWindows text_windows(const std::string& path, const DataOptions& options);

/// `tokens:FILE`: a 1-D integer .npy, or a flat little-endian uint16 .bin.
TokenWindows token_windows(const std::string& path, const DataOptions& options);

/// Cross-entropy (nats per token) of the test labels under the train labels'
/// unigram frequencies (add-one smoothed over `vocab`): the loss a model that
/// ignores context would reach, the baseline a language model must beat.
double unigram_loss(const DataSplit& split, int64_t vocab);

}  // namespace pipetrain::data
