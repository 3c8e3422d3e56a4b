// How a dataset feeds a graph: each array goes to the graph input of its name
// (a single-array source's features to the first input no named array
// takes), in the dtype that input takes, and the labels to the label input.
// Everything a bad dataset can get wrong is checked here, once, before any
// step: a missing input, a wrong dtype or sample shape, token ids beyond an
// embedding's rows, class ids beyond the logits.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "autodiff/training_graph.h"
#include "data/batch_loader.h"
#include "data/dataset.h"
#include "ir/graph.h"

namespace pipetrain::exec {

struct DataBinding {
  std::vector<std::string> inputs;  // graph inputs the dataset feeds, in graph order
  std::string labels;               // the graph input that takes the labels ("" for none)
};

/// The label input of a training graph: the one its attached loss added;
/// for a model's own loss, its input named `labels_key`, else its one input
/// the features leave ("" when there is none).
std::string label_input(const autodiff::TrainingGraph& tg, const std::string& labels_key,
                        const data::Dataset& ds);

/// Binds `split` to the graph inputs of `g` (a training graph, or a model
/// graph with `labels` "" for inference): afterwards both splits hold only
/// named `inputs`, keyed and typed as the graph's inputs (integer arrays
/// widen to float inputs; a float array never narrows to integers), and
/// labels shaped as `labels` takes them per sample. ModelError naming the
/// array, the input and the shapes on any mismatch. With `label_classes` > 0
/// every label id must lie in [0, label_classes) or equal `ignore_index`.
DataBinding bind_dataset(const ir::Graph& g, const std::string& labels, data::DataSplit& split,
                         const std::string& what, int64_t label_classes = 0,
                         int64_t ignore_index = -100);

/// The feeds of one batch of a bound dataset.
std::map<std::string, ir::Tensor> batch_feeds(const DataBinding& binding, const data::Batch& b);

/// Rows of a graph input's integer ids must index: the rows of the embedding
/// tables it gathers from (through reshapes and casts), 0 when unbounded.
int64_t id_bound(const ir::Graph& g, const std::string& input);

}  // namespace pipetrain::exec
