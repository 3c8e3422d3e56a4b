#include "cli/train_data.h"

#include "data/text_rows.h"
#include "ir/error.h"

namespace pipetrain::cli {

namespace {

bool is_token_source(const std::string& data) {
  return data.rfind("text:", 0) == 0 || data.rfind("tokens:", 0) == 0;
}

}  // namespace

void add_text_data_options(CLI::App& cmd, TrainArgs& a) {
  cmd.add_option("--tokenizer", a.tokenizer,
                 "text:, csv:, jsonl: data: a Hugging Face tokenizer.json or a SentencePiece "
                 ".model (pipetrain tokenize makes one; default: bytes)")
      ->check(CLI::ExistingFile);
  cmd.add_option("--seq-len", a.seq_len,
                 "text:/tokens: tokens per window; csv:/jsonl: the length texts are cut or "
                 "padded to (default: the model's input length)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--text-column", a.text_column, "csv:/jsonl: the text's column or key")
      ->capture_default_str();
  cmd.add_option("--text-pair-column", a.text_pair_column,
                 "csv:/jsonl: the second text's column or key: each row a sentence pair, framed "
                 "as the tokenizer frames pairs ([CLS] a [SEP] b [SEP]), token_type_ids 1 on b "
                 "where it says so");
  cmd.add_option("--label-column", a.label_column,
                 "csv:/jsonl: the label's column or key (none for a causal LM, whose labels are "
                 "the next tokens)")
      ->capture_default_str();
}

data::DataSplit load_train_data(const TrainArgs& a, const ir::Graph& model) {
  data::DataOptions o;
  o.seed = a.seed;
  o.test_fraction = a.test_fraction;
  o.max_samples = a.max_samples;
  o.labels_key = a.labels_key;
  o.ignore_index = a.ignore_index;
  o.seq_len = a.seq_len;
  o.tokenizer = a.tokenizer;
  const bool text_classes = data::is_text_rows(a.data);
  if (!a.text_pair_column.empty() && !text_classes)
    throw ModelError("--text-pair-column applies to csv: and jsonl: data, not " + a.data);
  if (!a.tokenizer.empty() && a.data.rfind("text:", 0) != 0 && !text_classes)
    throw ModelError("--tokenizer applies to text:, csv: and jsonl: data, not " + a.data);
  if (text_classes) {
    o.text_column = a.text_column;
    o.text_pair_column = a.text_pair_column;
    o.label_column = a.label_column;
    // The ids feed the first input; the masks the inputs named after them.
    for (const auto& in : model.inputs)
      if (in == "attention_mask" || in == "token_type_ids") o.text_inputs.push_back(in);
    // Logits (N, T, V): a causal language model learns each text's next tokens.
    const std::string out = a.loss_output.empty() ? model.outputs.at(0) : a.loss_output;
    o.causal_lm = model.has_tensor(out) && model.tensor(out).shape.size() == 3;
  }
  if (is_token_source(a.data) || text_classes) {
    if (model.inputs.empty()) throw ModelError(a.model.path + ": the model has no inputs");
    const ir::TensorDesc& in = model.tensor(model.inputs[0]);
    if (in.shape.size() != 2)
      throw ModelError("--data " + a.data + " gives (N, T) token ids but the model's input '" +
                       in.name + "' is " + ir::shape_str(in.shape));
    const int64_t positions = in.shape[1];
    if (o.seq_len == 0) o.seq_len = positions;
    if (o.seq_len != positions)
      throw ModelError("--seq-len " + std::to_string(o.seq_len) +
                       (o.seq_len > positions ? " is beyond" : " differs from") + " the model's " +
                       std::to_string(positions) + " positions (input '" + in.name + "' " +
                       ir::shape_str(in.shape) + "; export it with --seq-len " +
                       std::to_string(o.seq_len) + ")");
  } else if (a.seq_len > 0) {
    throw ModelError("--seq-len applies to text:, tokens:, csv: and jsonl: data");
  }
  return data::load_data(a.data, o);
}

autodiff::LossSpec train_loss_spec(const TrainArgs& a, const ir::Graph& model,
                                   const data::DataSplit& split) {
  autodiff::LossSpec spec{a.loss, a.loss_output};
  spec.ignore_index = a.ignore_index;
  if (a.loss != "cross-entropy") return spec;
  const std::string out = a.loss_output.empty() ? model.outputs.at(0) : a.loss_output;
  if (!model.has_tensor(out)) return spec;  // attach_loss names the problem
  const ir::Shape& pred = model.tensor(out).shape;
  const ir::Shape& labels = split.train.labels.shape();
  if (pred.size() < 3 || labels.size() != pred.size() - 1) return spec;
  // Labels (N, T..) fit (N, T.., V) (classes last) or ONNX's (N, C, T..): a language model's
  // logits are the first; take it whenever the labels match it.
  spec.classes_last =
      std::equal(labels.begin() + 1, labels.end(), pred.begin() + 1, pred.end() - 1);
  return spec;
}

exec::DataBinding bind_train_data(const TrainArgs& a, const autodiff::TrainingGraph& tg,
                                  data::DataSplit& split) {
  const std::string labels = exec::label_input(tg, a.labels_key, split.train);
  if (labels.empty())
    throw ModelError(a.model.path +
                     ": no model input takes the labels (its loss is its own output, and no "
                     "input is named '" +
                     a.labels_key + "'; name it with --labels)");
  return exec::bind_dataset(tg.graph, labels, split, a.data, tg.classes, tg.ignore_index);
}

}  // namespace pipetrain::cli
