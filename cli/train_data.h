// The data side of `pipetrain train`, shared by the one-worker and pipelined
// paths: --data loaded with the options that shape it (--seq-len from the
// model when not given, --labels, --ignore-index), the loss
// attached to fit the labels ((N) class ids, (N, T) per-token ids for
// (N, T, V) logits, ONNX's (N, d1, ...) for (N, C, d1, ...)), and the binding
// of the arrays to the training graph's inputs, checked before any step.
#pragma once

#include <string>

#include "autodiff/training_graph.h"
#include "cli/train_args.h"
#include "data/dataset.h"
#include "executor/data_binding.h"
#include "ir/graph.h"

namespace pipetrain::cli {

/// --tokenizer, --seq-len, --text-column and --label-column, shared by train and evaluate.
void add_text_data_options(CLI::App& cmd, TrainArgs& a);

/// Loads --data for `model` (its first input's length is the default --seq-len of text: and
/// tokens: sources; a different --seq-len is refused naming the model's positions).
data::DataSplit load_train_data(const TrainArgs& a, const ir::Graph& model);

/// The loss to attach: --loss with the class axis the labels imply.
autodiff::LossSpec train_loss_spec(const TrainArgs& a, const ir::Graph& model,
                                   const data::DataSplit& split);

/// Binds `split` to `tg` (see exec::bind_dataset).
exec::DataBinding bind_train_data(const TrainArgs& a, const autodiff::TrainingGraph& tg,
                                  data::DataSplit& split);

}  // namespace pipetrain::cli
