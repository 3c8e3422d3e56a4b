#include "data/text.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "data/tokenizer.h"
#include "ir/error.h"
#include "ir/npy.h"

namespace pipetrain::data {

namespace fs = std::filesystem;

namespace {

// Token ids fit an int32 (every real vocabulary does); larger ones are damage.
constexpr int64_t kMaxTokenId = (int64_t{1} << 31) - 1;

Dataset windows(const std::vector<int64_t>& stream, int64_t first, int64_t count, int64_t t) {
  Dataset ds;
  ds.features = ir::Tensor(ir::DType::kI64, {count, t});  // (N, T)
  ds.labels = ir::Tensor(ir::DType::kI64, {count, t});    // (N, T)
  int64_t* x = ds.features.data<int64_t>();
  int64_t* y = ds.labels.data<int64_t>();
  for (int64_t i = 0; i < count; ++i)
    for (int64_t j = 0; j < t; ++j) {
      const size_t at = static_cast<size_t>((first + i) * t + j);
      x[i * t + j] = stream[at];
      y[i * t + j] = stream[at + 1];
    }
  return ds;
}

}  // namespace

TokenWindows window_stream(const std::vector<int64_t>& stream, int64_t seq_len,
                           double test_fraction, int64_t vocab, const std::string& what) {
  if (seq_len < 1)
    throw ModelError(what + ": needs --seq-len (tokens per window), got " +
                     std::to_string(seq_len));
  if (stream.empty()) throw ModelError(what + ": the corpus is empty (no tokens)");
  const int64_t n = (static_cast<int64_t>(stream.size()) - 1) / seq_len;
  const int64_t n_test = std::llround(static_cast<double>(n) * test_fraction);
  if (n - n_test < 1)
    throw ModelError(what + ": " + std::to_string(stream.size()) +
                     " tokens make no training window of --seq-len " + std::to_string(seq_len) +
                     " plus one label token (after holding out " + std::to_string(n_test) + ")");
  TokenWindows w;
  w.tokens = static_cast<int64_t>(stream.size());
  w.vocab = vocab;
  w.split.train = windows(stream, 0, n - n_test, seq_len);
  w.split.test = windows(stream, n - n_test, n_test, seq_len);
  w.split.train.num_classes = w.split.test.num_classes = vocab;
  return w;
}

TokenWindows text_windows(const std::string& path, const DataOptions& options) {
  const auto tokenizer = make_tokenizer(options.tokenizer);
  std::vector<int64_t> stream;
  for (const auto& file : text_files(path)) {
    const auto ids = tokenizer->encode(read_utf8_file(file));
    stream.insert(stream.end(), ids.begin(), ids.end());
  }
  if (stream.empty()) throw ModelError(path + ": the corpus is empty (no text)");
  return window_stream(stream, options.seq_len, options.test_fraction, tokenizer->vocab_size(),
                       "text:" + path);
}

TokenWindows token_windows(const std::string& path, const DataOptions& options) {
  if (!fs::is_regular_file(path)) throw ModelError(path + ": no such file");
  std::vector<int64_t> stream;
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".bin") == 0) {
    // nanoGPT's format: the ids as raw little-endian uint16.
    const auto bytes = fs::file_size(path);
    if (bytes % 2 != 0)
      throw ModelError(path + ": " + std::to_string(bytes) +
                       " bytes is not a whole number of uint16 tokens");
    std::ifstream f(path, std::ios::binary);
    std::vector<uint16_t> ids(bytes / 2);
    f.read(reinterpret_cast<char*>(ids.data()), static_cast<std::streamsize>(bytes));
    if (!f) throw ModelError(path + ": cannot read");
    stream.assign(ids.begin(), ids.end());
  } else {
    ir::Tensor t = ir::load_npy(path);
    if (t.rank() != 1 || ir::is_float(t.dtype()))
      throw ModelError(path + ": a token stream must be a 1-D integer array, got " +
                       ir::dtype_name(t.dtype()) + " " + ir::shape_str(t.shape()));
    stream = t.to_i64();
  }
  int64_t max_id = -1;
  for (size_t i = 0; i < stream.size(); ++i) {
    if (stream[i] < 0 || stream[i] > kMaxTokenId)
      throw ModelError(path + ": token " + std::to_string(i) + " has id " +
                       std::to_string(stream[i]) + (stream[i] < 0 ? ", a negative id" :
                       ", beyond any vocabulary (ids are at most 2^31 - 1)"));
    max_id = std::max(max_id, stream[i]);
  }
  return window_stream(stream, options.seq_len, options.test_fraction, max_id + 1,
                       "tokens:" + path);
}

double unigram_loss(const DataSplit& split, int64_t vocab) {
  // Sparse counts: memory follows the tokens, not the vocabulary.
  std::unordered_map<int64_t, double> count;
  double total = static_cast<double>(vocab);  // add-one smoothing
  const ir::Tensor& train = split.train.labels;
  for (int64_t i = 0; i < train.numel(); ++i) {
    const int64_t id = train.data<int64_t>()[i];
    if (id < 0 || id >= vocab) continue;
    count[id] += 1;
    total += 1;
  }
  const ir::Tensor& test = split.test.labels;
  double nll = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < test.numel(); ++i) {
    const int64_t id = test.data<int64_t>()[i];
    if (id < 0 || id >= vocab) continue;
    auto it = count.find(id);
    nll -= std::log(((it == count.end() ? 0.0 : it->second) + 1.0) / total);
    ++n;
  }
  return n > 0 ? nll / static_cast<double>(n) : 0.0;
}

}  // namespace pipetrain::data
