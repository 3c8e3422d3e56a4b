// Datasets for training: built-in sources (fashion-mnist, digits, synthetic)
// and files (IDX, CSV, .npy, .npz), each loaded into a train/test split of
// host tensors. Every bad input ends in one ModelError naming the file and
// the problem.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace pipetrain::data {

/// Samples along dimension 0 of every array. A dataset is a set of arrays fed
/// to a model's graph inputs: `inputs` by name (from an .npz or a directory of
/// NAME.npy files), and `features`, the one array of a single-array source
/// (IDX, CSV, an x/y pair, the built-ins, text), which feeds the model's first
/// input that no named array takes.
struct Dataset {
  std::string name;
  ir::Tensor features;  // (N, ...) f32, or i64 for integer arrays (token ids); may be undefined
  std::map<std::string, ir::Tensor> inputs;  // input name -> (N, ...) f32, i64 or bool
  /// (N) or (N, ...) i64 class ids (ids equal to DataOptions::ignore_index allowed), or
  /// (N, ...) f32 regression targets.
  ir::Tensor labels;
  int64_t num_classes = 0;  // 0 for regression
  /// The source's sample behind each sample here, once a split or a selection took rows
  /// (empty: the same index), so messages name the sample the user can find.
  std::vector<int64_t> source_rows;
  int64_t source_row(int64_t i) const {
    return source_rows.empty() ? i : source_rows[static_cast<size_t>(i)];
  }
  int64_t size() const {
    if (features.defined()) return features.shape()[0];
    return inputs.empty() ? 0 : inputs.begin()->second.shape()[0];
  }
  bool is_classification() const { return num_classes > 0; }
};

struct DataSplit {
  Dataset train, test;
  /// text: and tokens: sources: the test tokens' cross-entropy under the train tokens' unigram
  /// frequencies (nats per token), the baseline a language model must beat; 0 otherwise.
  double unigram_loss = 0;
};

struct DataOptions {
  /// Share of samples held out for sources without a fixed test set.
  double test_fraction = 0.2;
  /// Seeds the train/test split and the synthetic generators.
  uint64_t seed = 0;
  /// Standardise each feature with the train split's mean and std (applied to both splits).
  bool normalize = false;
  /// CSV: label column, by header name or index (negative counts from the end). Empty: the last.
  std::string label_column;
  /// "auto" (integer labels are classes, others regression targets), "classification" or
  /// "regression". Applies to CSV and .npy/.npz sources.
  std::string task = "auto";
  /// When > 0, labels must lie in [0, num_classes) and the dataset reports this many classes.
  int64_t num_classes = 0;
  /// When > 0, keep only the first max_samples of each split (fast experiments and tests).
  int64_t max_samples = 0;
  /// Named-array sources (.npz, a directory of NAME.npy): the array that holds the labels.
  std::string labels_key = "labels";
  /// Class ids equal to this are allowed in labels (tokens a loss ignores: PyTorch's -100).
  int64_t ignore_index = -100;
  /// text: and tokens: sources: tokens per training window (the labels are the next tokens);
  /// csv: and jsonl: sources: the length every text is truncated or padded to (0: the longest).
  int64_t seq_len = 0;
  /// text:, csv: and jsonl: sources: a tokenizer.json or SentencePiece .model file; empty for
  /// the byte-level tokenizer.
  std::string tokenizer;
  /// csv: and jsonl: sources: the text's column or key (default "text"; the label's is
  /// label_column, default "label"), and which of attention_mask and token_type_ids to make
  /// (the model's inputs of those names).
  std::string text_column;
  std::vector<std::string> text_inputs;
  /// csv: and jsonl: sources: the second text's column or key, for sentence pairs
  /// (framed as the tokenizer frames pairs, token_type_ids 1 on the second text where
  /// the tokenizer says so); empty for one text per row.
  std::string text_pair_column;
  /// csv: and jsonl: sources for a causal language model: the labels are each text's next
  /// tokens (ignore_index on padding), and there is no label column.
  bool causal_lm = false;
  /// synthetic:<kind> sizes: samples (before the split), features, classes, noise std.
  int64_t synthetic_samples = 1000;
  int64_t synthetic_features = 2;
  int64_t synthetic_classes = 3;
  double synthetic_noise = 0.5;
};

/// Loads a built-in dataset or files and splits it.
///   "fashion-mnist"    Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist):
///                      (N, 1, 28, 28) f32 in [0, 1], i64 labels, the fixed 60k/10k split.
///   "digits"           scikit-learn's digits.csv.gz (python3-sklearn): (N, 64) f32 in [0, 1],
///                      10 classes, a seeded stratified split by test_fraction.
///   "synthetic:blobs"  Gaussian class blobs; "synthetic:regression" y = x.w + b + noise;
///                      "synthetic:spirals" interleaved 2-D spirals (one per class).
///   a directory        IDX files ({train,t10k,test}-{images,labels}-*[.gz]: fixed split) or a
///                      features/labels pair (x.npy + y.npy, features.npy + labels.npy).
///   file.npz           keys x/y or features/labels (split), or x_train/y_train/x_test/y_test.
///   x.npy              with its sibling y.npy (x->y, features->labels, images->labels);
///                      "a.npy,b.npy" names the pair explicitly.
///   *-images-*[.gz]    an IDX images file with its sibling labels file.
///   file.csv[.gz]      one sample per row, header optional, labels from label_column.
///   named arrays       an .npz or a directory of NAME.npy files that holds labels_key: every
///                      other array feeds the graph input of its name (any dtype).
///   text:PATH          UTF-8 text (a file, or a directory's *.txt and extensionless files)
///                      tokenized byte by byte (vocab 256), cut into windows of seq_len
///                      tokens with the next tokens as labels; the last test_fraction of the
///                      windows is held out (text follows text: no shuffled split).
///   tokens:FILE        a pre-tokenized stream: a 1-D integer .npy, or a flat uint16 .bin
///                      (nanoGPT's format), windowed and split like text.
///   csv:FILE, jsonl:FILE  sequence classification: a text and a label per row (see
///                      data/text_rows.h), split like the CSV datasets.
DataSplit load_data(const std::string& name_or_path, const DataOptions& options = {});

/// Where the built-in sources live (overridable for tests through the environment variables
/// PIPETRAIN_FASHION_MNIST_DIR and PIPETRAIN_DIGITS_CSV); empty when not found.
std::string fashion_mnist_dir();
std::string digits_csv_path();

}  // namespace pipetrain::data
