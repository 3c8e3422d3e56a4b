// A C ABI over Debian's libsentencepiece, built as its own module. pipetrain
// dlopens it with RTLD_LOCAL | RTLD_DEEPBIND: libsentencepiece carries its own
// copy of protobuf, whose symbols would otherwise resolve against libonnx's
// libprotobuf (linked directly, the process crashes at load).
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using Processor = sentencepiece::SentencePieceProcessor;

void set_error(const sentencepiece::util::Status& s, char* err, int err_len) {
  std::snprintf(err, static_cast<size_t>(err_len), "%s", s.ToString().c_str());
}

// Feeds the trainer the non-empty lines of a buffer pipetrain already read and checked.
class LineIterator final : public sentencepiece::SentenceIterator {
 public:
  LineIterator(const char* text, size_t len) : text_(text), len_(len) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    while (pos_ < len_) {
      const char* end = static_cast<const char*>(std::memchr(text_ + pos_, '\n', len_ - pos_));
      const size_t stop = end ? static_cast<size_t>(end - text_) : len_;
      line_.assign(text_ + pos_, stop - pos_);
      pos_ = stop + 1;
      if (!line_.empty()) return;
    }
    done_ = true;
  }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const char* text_;
  size_t len_, pos_ = 0;
  std::string line_;
  bool done_ = false;
};

}  // namespace

extern "C" {

// Trains a model from trainer options, one `name=value` per line (values may
// hold spaces, unlike SentencePiece's flag string), on the lines of
// text[0, len); 0 on success.
int pipetrain_spm_train(const char* options, const char* text, long len, char* err, int err_len) {
  std::unordered_map<std::string, std::string> kwargs;
  std::istringstream in(options);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    if (line.compare(0, eq, "seed") == 0)  // the sampler's seed: not a trainer field
      sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(std::stoul(line.substr(eq + 1))));
    else
      kwargs[line.substr(0, eq)] = line.substr(eq + 1);
  }
  LineIterator lines(text, static_cast<size_t>(len));
  const auto s = sentencepiece::SentencePieceTrainer::Train(kwargs, &lines);
  if (s.ok()) return 0;
  set_error(s, err, err_len);
  return 1;
}

void* pipetrain_spm_load(const char* path, char* err, int err_len) {
  auto* p = new Processor();
  const auto s = p->Load(path);
  if (s.ok()) return p;
  set_error(s, err, err_len);
  delete p;
  return nullptr;
}

void pipetrain_spm_free(void* h) {
  delete static_cast<Processor*>(h);
}

int pipetrain_spm_vocab(void* h) {
  return static_cast<Processor*>(h)->GetPieceSize();
}

// The id of a control piece, -1 when the model has no such control piece.
int pipetrain_spm_control_id(void* h, const char* piece) {
  const auto* p = static_cast<Processor*>(h);
  const int id = p->PieceToId(piece);
  return id != p->unk_id() && p->IsControl(id) ? id : -1;
}

// Encodes text[0, len) into *ids (malloc'd, the caller frees with
// pipetrain_spm_release); returns the count, -1 on error.
long pipetrain_spm_encode(void* h, const char* text, long len, int** ids, char* err, int err_len) {
  std::vector<int> out;
  const auto s =
      static_cast<Processor*>(h)->Encode(std::string(text, static_cast<size_t>(len)), &out);
  if (!s.ok()) {
    set_error(s, err, err_len);
    return -1;
  }
  *ids = static_cast<int*>(std::malloc(std::max<size_t>(out.size(), 1) * sizeof(int)));
  std::memcpy(*ids, out.data(), out.size() * sizeof(int));
  return static_cast<long>(out.size());
}

// Decodes ids into *text (malloc'd); returns its length, -1 on error.
long pipetrain_spm_decode(void* h, const int* ids, long n, char** text, char* err, int err_len) {
  std::string out;
  const auto s = static_cast<Processor*>(h)->Decode(std::vector<int>(ids, ids + n), &out);
  if (!s.ok()) {
    set_error(s, err, err_len);
    return -1;
  }
  *text = static_cast<char*>(std::malloc(out.size() + 1));
  std::memcpy(*text, out.data(), out.size());
  return static_cast<long>(out.size());
}

void pipetrain_spm_release(void* p) {
  std::free(p);
}

}  // extern "C"
