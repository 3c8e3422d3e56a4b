#include "data/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/hf_tokenizer.h"
#include "data/sentencepiece.h"
#include "ir/error.h"

namespace pipetrain::data {

namespace fs = std::filesystem;

namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<int64_t> encode(const std::string& text) const override {
    std::vector<int64_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string s(ids.size(), '\0');
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] > 255)
        throw ModelError("byte tokenizer: id " + std::to_string(ids[i]) +
                         " is outside the vocabulary [0, 256)");
      s[i] = static_cast<char>(ids[i]);
    }
    return s;
  }
  int64_t vocab_size() const override { return 256; }
  std::string describe() const override { return "bytes"; }
};

// Offset of the first byte that does not continue a valid UTF-8 sequence, or
// npos. Overlong forms and surrogates are rejected as Unicode requires.
size_t first_invalid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = p[i];
    size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + len > n || p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    i += len;
  }
  return std::string::npos;
}

}  // namespace

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& model_path) {
  if (model_path.size() >= 5 && model_path.compare(model_path.size() - 5, 5, ".json") == 0)
    return load_hf_tokenizer(model_path);
  if (!model_path.empty()) return load_sentencepiece(model_path);
  return std::make_unique<ByteTokenizer>();
}

std::vector<std::string> text_files(const std::string& path) {
  if (!fs::exists(path)) throw ModelError(path + ": no such file or directory");
  if (!fs::is_directory(path)) return {path};
  std::vector<std::string> files;
  for (auto it = fs::recursive_directory_iterator(path); it != fs::recursive_directory_iterator();
       ++it) {
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_symlink() || !it->is_regular_file()) continue;
    if (p.extension() == ".txt" || !p.has_extension()) files.push_back(p.string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty())
    throw ModelError(path +
                     ": no text files in this directory (*.txt or files without an "
                     "extension)");
  return files;
}

std::string read_utf8_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ModelError(path + ": cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  if (const size_t bad = first_invalid_utf8(text); bad != std::string::npos) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(text[bad]));
    throw ModelError(path + ": not UTF-8 text (invalid byte " + hex + " at offset " +
                     std::to_string(bad) + ")");
  }
  return text;
}

}  // namespace pipetrain::data
