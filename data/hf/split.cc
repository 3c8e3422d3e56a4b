#include "data/hf/split.h"

#include "ir/error.h"

namespace pipetrain::data::hf {

SplitBehavior split_behavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  throw ModelError("unsupported split behavior '" + name + "'");
}

std::vector<std::string> split(std::string_view text, const Ranges& matches, SplitBehavior behavior,
                               bool invert) {
  struct Part {
    size_t begin, end;
    bool is_match;
  };
  // The whole text as alternating parts, each a match or the gap before one.
  std::vector<Part> parts;
  size_t at = 0;
  for (const auto& [b, e] : matches) {
    if (b > at) parts.push_back({at, b, invert});
    parts.push_back({b, e, !invert});
    at = e;
  }
  if (at < text.size()) parts.push_back({at, text.size(), invert});

  std::vector<std::pair<size_t, size_t>> kept;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const auto& p : parts)
        if (!p.is_match) kept.emplace_back(p.begin, p.end);
      break;
    case SplitBehavior::kIsolated:
      for (const auto& p : parts) kept.emplace_back(p.begin, p.end);
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const auto& p : parts) {
        if (p.is_match && !previous_match && !kept.empty())
          kept.back().second = p.end;
        else
          kept.emplace_back(p.begin, p.end);
        previous_match = p.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool next_match = false;  // walking backwards: whether the part after this one matched
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !next_match && !kept.empty())
          kept.back().first = it->begin;
        else
          kept.emplace_back(it->begin, it->end);
        next_match = it->is_match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const auto& p : parts) {
        if (p.is_match == previous_match && !kept.empty())
          kept.back().second = p.end;
        else
          kept.emplace_back(p.begin, p.end);
        previous_match = p.is_match;
      }
      break;
    }
  }
  std::vector<std::string> pieces;
  for (const auto& [b, e] : kept)
    if (e > b) pieces.emplace_back(text.substr(b, e - b));
  return pieces;
}

Ranges char_matches(std::string_view text, const std::function<bool(char32_t)>& pred) {
  Ranges out;
  for (size_t i = 0; i < text.size();) {
    const size_t len = std::min(utf8_length(static_cast<unsigned char>(text[i])), text.size() - i);
    if (pred(to_u32(text.substr(i, len))[0])) out.emplace_back(i, i + len);
    i += len;
  }
  return out;
}

}  // namespace pipetrain::data::hf
