#include "data/sentencepiece.h"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>

#include "ir/error.h"

namespace pipetrain::data {

namespace fs = std::filesystem;

namespace {

constexpr int kErrLen = 1024;
constexpr const char* kNewline = "<nl>";

// The module's entry points (data/sentencepiece/shim.cc).
struct SpmApi {
  int (*train)(const char*, const char*, long, char*, int);
  void* (*load)(const char*, char*, int);
  void (*free)(void*);
  int (*vocab)(void*);
  int (*control_id)(void*, const char*);
  long (*encode)(void*, const char*, long, int**, char*, int);
  long (*decode)(void*, const int*, long, char**, char*, int);
  void (*release)(void*);
};

// Where the module may be: beside the running binary (a copied pipetrain),
// in the install tree's lib/pipetrain (cmake --install, the .deb), then where
// this build put it.
std::vector<std::string> module_candidates() {
  std::vector<std::string> paths;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    paths.push_back((exe.parent_path() / "libpipetrain_sentencepiece.so").string());
    paths.push_back(
        (exe.parent_path().parent_path() / "lib/pipetrain/libpipetrain_sentencepiece.so").string());
  }
#ifdef PIPETRAIN_SPM_MODULE
  paths.push_back(PIPETRAIN_SPM_MODULE);
#endif
  return paths;
}

const SpmApi& spm_api() {
  static SpmApi api{};
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
#ifndef PIPETRAIN_SPM_MODULE
    error = "pipetrain was built without SentencePiece (install libsentencepiece-dev and rebuild)";
    return;
#endif
    void* h = nullptr;
    std::string tried;
    for (const auto& path : module_candidates()) {
      if (!fs::exists(path)) continue;
      // DEEPBIND: the library's protobuf symbols must bind to its own copy.
      h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (h) break;
      tried += std::string(tried.empty() ? "" : "; ") + dlerror();
    }
    if (!h) {
      error = "cannot load the SentencePiece module libpipetrain_sentencepiece.so" +
              (tried.empty() ? std::string(" (not found beside pipetrain)") : ": " + tried);
      return;
    }
    auto sym = [&](const char* name) {
      void* f = dlsym(h, name);
      if (!f) error = std::string("libpipetrain_sentencepiece.so lacks ") + name;
      return f;
    };
    api.train = reinterpret_cast<decltype(api.train)>(sym("pipetrain_spm_train"));
    api.load = reinterpret_cast<decltype(api.load)>(sym("pipetrain_spm_load"));
    api.free = reinterpret_cast<decltype(api.free)>(sym("pipetrain_spm_free"));
    api.vocab = reinterpret_cast<decltype(api.vocab)>(sym("pipetrain_spm_vocab"));
    api.control_id = reinterpret_cast<decltype(api.control_id)>(sym("pipetrain_spm_control_id"));
    api.encode = reinterpret_cast<decltype(api.encode)>(sym("pipetrain_spm_encode"));
    api.decode = reinterpret_cast<decltype(api.decode)>(sym("pipetrain_spm_decode"));
    api.release = reinterpret_cast<decltype(api.release)>(sym("pipetrain_spm_release"));
  });
  if (!error.empty()) throw ModelError(error);
  return api;
}

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(const SpmApi& api, void* handle, std::string path)
      : api_(api), handle_(handle), path_(std::move(path)) {
    vocab_ = api_.vocab(handle_);
    newline_ = api_.control_id(handle_, kNewline);
  }
  ~SentencePieceTokenizer() override { api_.free(handle_); }

  std::vector<int64_t> encode(const std::string& text) const override {
    std::vector<int64_t> ids;
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t end = text.find('\n', pos);
      const bool last = end == std::string::npos;
      if (last) end = text.size();
      encode_line(text.data() + pos, end - pos, ids);
      if (!last && newline_ >= 0) ids.push_back(newline_);
      pos = end + 1;
    }
    return ids;
  }

  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string text;
    std::vector<int> line;
    for (const int64_t id : ids) {
      if (id < 0 || id >= vocab_)
        throw ModelError(describe() + ": id " + std::to_string(id) +
                         " is outside the vocabulary [0, " + std::to_string(vocab_) + ")");
      if (id == newline_) {
        text += decode_line(line) + "\n";
        line.clear();
      } else {
        line.push_back(static_cast<int>(id));
      }
    }
    return text + decode_line(line);
  }

  int64_t vocab_size() const override { return vocab_; }
  std::string describe() const override { return "SentencePiece " + path_; }

 private:
  void encode_line(const char* s, size_t n, std::vector<int64_t>& ids) const {
    if (n == 0) return;
    int* out = nullptr;
    char err[kErrLen] = {0};
    const long count = api_.encode(handle_, s, static_cast<long>(n), &out, err, kErrLen);
    if (count < 0) throw ModelError(describe() + ": cannot encode: " + err);
    ids.insert(ids.end(), out, out + count);
    api_.release(out);
  }

  std::string decode_line(const std::vector<int>& line) const {
    if (line.empty()) return {};
    char* out = nullptr;
    char err[kErrLen] = {0};
    const long len =
        api_.decode(handle_, line.data(), static_cast<long>(line.size()), &out, err, kErrLen);
    if (len < 0) throw ModelError(describe() + ": cannot decode: " + err);
    std::string s(out, static_cast<size_t>(len));
    api_.release(out);
    return s;
  }

  const SpmApi& api_;
  void* handle_;
  std::string path_;
  int64_t vocab_ = 0;
  int64_t newline_ = -1;
};

}  // namespace

std::string sentencepiece_module() {
#ifndef PIPETRAIN_SPM_MODULE
  return "unavailable: built without SentencePiece";
#endif
  // The candidate spm_api() would load, found without loading it (a dlopen with
  // RTLD_DEEPBIND would abort a sanitized build's pipetrain --version).
  for (const auto& path : module_candidates())
    if (fs::exists(path)) return path;
  return "unavailable: libpipetrain_sentencepiece.so not found beside pipetrain";
}

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_path) {
  if (!fs::is_regular_file(model_path))
    throw ModelError(model_path + ": no such SentencePiece model file");
  const SpmApi& api = spm_api();
  char err[kErrLen] = {0};
  void* h = api.load(model_path.c_str(), err, kErrLen);
  if (!h) throw ModelError(model_path + ": not a SentencePiece model (" + err + ")");
  return std::make_unique<SentencePieceTokenizer>(api, h, model_path);
}

void train_sentencepiece(const std::string& text, const std::string& out_model,
                         const SentencePieceOptions& o) {
  const fs::path out(out_model);
  if (out.extension() != ".model")
    throw ModelError(out_model + ": a SentencePiece model path must end in .model");
  const fs::path dir = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  if (!fs::is_directory(dir)) throw ModelError(out_model + ": no such directory " + dir.string());
  const SpmApi& api = spm_api();
  // Train under a temporary prefix beside the output, then rename: a failed or
  // interrupted run leaves no half-written model.
  const fs::path tmp = dir / (".pipetrain-spm-" + std::to_string(getpid()));
  const std::string flags =
      "model_prefix=" + tmp.string() + "\nvocab_size=" + std::to_string(o.vocab_size) +
      "\nmodel_type=" + o.model_type + "\ninput_sentence_size=" + std::to_string(o.max_lines) +
      "\nshuffle_input_sentence=true\ncharacter_coverage=1.0" + "\ncontrol_symbols=" + kNewline +
      "\nminloglevel=2" + "\nseed=" + std::to_string(o.seed) + "\n";
  char err[kErrLen] = {0};
  const int rc =
      api.train(flags.c_str(), text.data(), static_cast<long>(text.size()), err, kErrLen);
  std::error_code ec;
  fs::remove(tmp.string() + ".vocab", ec);
  if (rc != 0) {
    fs::remove(tmp.string() + ".model", ec);
    throw ModelError("SentencePiece training failed: " + std::string(err));
  }
  fs::rename(tmp.string() + ".model", out, ec);
  if (ec) throw ModelError(out_model + ": cannot write (" + ec.message() + ")");
}

}  // namespace pipetrain::data
