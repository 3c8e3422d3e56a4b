// Splitting text into pieces around matches, with the five behaviours of the
// Hugging Face tokenizers (SplitDelimiterBehavior) that their pre-tokenizers
// share. Pieces are byte strings; offsets are not kept (pipetrain needs ids).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "data/hf/unicode.h"

namespace pipetrain::data::hf {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

/// "Removed", "Isolated", ... as tokenizer.json spells them; ModelError otherwise.
SplitBehavior split_behavior(const std::string& name);

/// `text` cut at `matches` (sorted, non-overlapping): with `invert` the text
/// between the matches is what matches. Empty pieces are dropped.
std::vector<std::string> split(std::string_view text, const Ranges& matches, SplitBehavior behavior,
                               bool invert = false);

/// Each code point for which `pred` holds, as a match of its own.
Ranges char_matches(std::string_view text, const std::function<bool(char32_t)>& pred);

}  // namespace pipetrain::data::hf
