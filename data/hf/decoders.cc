// Decoders: ByteLevel, WordPiece, Metaspace, BPEDecoder, Replace, ByteFallback,
// Fuse, Strip and Sequence, each a step of the tokenizers' decode_chain.
#include "data/hf/byte_level.h"
#include "data/hf/components.h"
#include "data/hf/unicode.h"
#include "ir/error.h"

namespace pipetrain::data::hf {

namespace {

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// BERT's detokenizing clean-up of spaces before punctuation and contractions.
std::string cleanup(std::string s) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) s = replace_all(std::move(s), from, to);
  return s;
}

char32_t one_char(const Json& j, const char* key) {
  const std::u32string s = to_u32(j.at(key).get<std::string>());
  if (s.size() != 1) throw ModelError(std::string("decoder's ") + key + " is not one character");
  return s[0];
}

Decoder byte_level() {
  return [](std::vector<std::string> tokens) {
    std::string bytes;
    for (const auto& t : tokens) {
      std::string these;
      bool all = true;
      for (char32_t c : to_u32(t)) {
        const auto b = char_to_byte(c);
        if (!b) {
          all = false;
          break;
        }
        these += static_cast<char>(*b);
      }
      bytes += all ? these : t;
    }
    return std::vector<std::string>{utf8_lossy(bytes)};
  };
}

Decoder byte_fallback() {
  return [](std::vector<std::string> tokens) {
    std::vector<std::string> out;
    std::string run;  // consecutive <0xXX> bytes
    size_t run_tokens = 0;
    auto flush = [&] {
      if (run_tokens == 0) return;
      if (utf8_lossy(run) == run) {
        out.push_back(run);
      } else {
        for (size_t k = 0; k < run_tokens; ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      run.clear();
      run_tokens = 0;
    };
    for (auto& t : tokens) {
      const bool is_byte = t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
                           std::isxdigit(static_cast<unsigned char>(t[3])) &&
                           std::isxdigit(static_cast<unsigned char>(t[4]));
      if (is_byte) {
        run += static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16));
        ++run_tokens;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    return out;
  };
}

Decoder strip(const Json& j) {
  const char32_t content = one_char(j, "content");
  const size_t start = value_or<size_t>(j, "start", 0), stop = value_or<size_t>(j, "stop", 0);
  return [=](std::vector<std::string> tokens) {
    for (auto& t : tokens) {
      const std::u32string u = to_u32(t);
      size_t b = 0, e = u.size();
      while (b < std::min(start, u.size()) && u[b] == content) ++b;
      for (size_t k = 0; k < stop && e > b && u[e - 1] == content; ++k) --e;
      t = to_utf8(std::u32string_view(u).substr(b, e - b));
    }
    return tokens;
  };
}

}  // namespace

Decoder make_decoder(const Json& j) {
  const std::string type = component_type(j, "decoder");
  if (type == "ByteLevel") return byte_level();
  if (type == "ByteFallback") return byte_fallback();
  if (type == "Strip") return strip(j);
  if (type == "WordPiece") {
    const std::string prefix = value_or<std::string>(j, "prefix", "##");
    const bool clean = value_or(j, "cleanup", true);
    return [prefix, clean](std::vector<std::string> tokens) {
      for (size_t i = 0; i < tokens.size(); ++i) {
        std::string& t = tokens[i];
        if (i > 0) t = t.compare(0, prefix.size(), prefix) == 0 ? t.substr(prefix.size()) : " " + t;
        if (clean) t = cleanup(std::move(t));
      }
      return tokens;
    };
  }
  if (type == "Metaspace") {
    const char32_t replacement = one_char(j, "replacement");
    const bool prefix_space = value_or(j, "add_prefix_space", true);
    return [=](std::vector<std::string> tokens) {
      for (size_t i = 0; i < tokens.size(); ++i) {
        std::string out;
        for (char32_t c : to_u32(tokens[i])) {
          if (c != replacement)
            append_utf8(out, c);
          else if (i > 0 || !prefix_space)
            out += ' ';
        }
        tokens[i] = std::move(out);
      }
      return tokens;
    };
  }
  if (type == "BPEDecoder") {
    const std::string suffix = value_or<std::string>(j, "suffix", "</w>");
    return [suffix](std::vector<std::string> tokens) {
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = replace_all(tokens[i], suffix, i + 1 == tokens.size() ? "" : " ");
      return tokens;
    };
  }
  if (type == "Replace") {
    auto regex = std::make_shared<Regex>(pattern_source(j.at("pattern")));
    const std::string content = j.at("content").get<std::string>();
    return [regex, content](std::vector<std::string> tokens) {
      for (auto& t : tokens) t = regex->replace_all(t, content);
      return tokens;
    };
  }
  if (type == "Fuse") {
    return [](std::vector<std::string> tokens) {
      std::string all;
      for (const auto& t : tokens) all += t;
      return std::vector<std::string>{all};
    };
  }
  if (type == "Sequence") {
    std::vector<Decoder> parts;
    for (const auto& d : j.at("decoders")) parts.push_back(make_decoder(d));
    return [parts](std::vector<std::string> tokens) {
      for (const auto& d : parts) tokens = d(std::move(tokens));
      return tokens;
    };
  }
  unsupported("decoder", type,
              "ByteLevel, WordPiece, Metaspace, BPEDecoder, Replace, ByteFallback, Fuse, Strip, "
              "Sequence");
}

}  // namespace pipetrain::data::hf
