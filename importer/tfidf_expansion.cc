// TfIdfVectorizer on integer tokens, expanded at import: every n-gram window
// (each length from min_gram_length to max_gram_length, each skip up to
// max_skip_count; unigrams once) is gathered by a constant index, compared
// with the pool's n-grams of that length, and the matches counted; a constant
// matrix then puts each pool n-gram's count (TF), presence (IDF) or both
// weighted (TFIDF) at its output index. Shapes are static, so the output is too.
#include "importer/expansion_builder.h"
#include "importer/internal.h"

namespace pipetrain::importer::detail {

namespace {

using ir::Attribute;
using ir::DType;

}  // namespace

std::vector<ir::Node> expand_tfidf(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  ExpansionBuilder b(g, n, t);
  const ir::Shape x_shape = b.shape(0);
  const DType x_type = g.tensor(n.inputs[0]).dtype;
  if (x_type != DType::kI32 && x_type != DType::kI64)
    b.fail("input of dtype " + std::string(ir::dtype_name(x_type)) +
           " (integer tokens; strings are not supported)");
  if (x_shape.size() != 1 && x_shape.size() != 2)
    b.fail("input " + ir::shape_str(x_shape) + " is not [C] or [N, C]");
  const int64_t batch = x_shape.size() == 2 ? x_shape[0] : 1, len = x_shape.back();
  const int64_t min_n = n.attr_int("min_gram_length", 0), max_n = n.attr_int("max_gram_length", 0);
  const int64_t max_skip = n.attr_int("max_skip_count", 0);
  const std::string mode = n.attr_string("mode", "");
  const std::vector<int64_t> pool = n.attr_ints("pool_int64s"),
                             counts = n.attr_ints("ngram_counts"),
                             indexes = n.attr_ints("ngram_indexes");
  std::vector<float> weights = n.attr_floats("weights");
  if (n.has_attr("pool_strings")) b.fail("pool_strings (string tokens are not supported)");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    b.fail("mode '" + mode + "' (TF, IDF or TFIDF)");
  if (min_n < 1 || max_n < min_n || max_skip < 0)
    b.fail("gram lengths " + std::to_string(min_n) + " to " + std::to_string(max_n) +
           " and max_skip_count " + std::to_string(max_skip));
  // Level k (k + 1-grams) spans pool[counts[k], counts[k + 1]).
  std::vector<int64_t> level_start = counts;
  level_start.push_back(static_cast<int64_t>(pool.size()));
  int64_t grams = 0;
  for (size_t k = 0; k + 1 < level_start.size(); ++k) {
    const int64_t span = level_start[k + 1] - level_start[k];
    if (span < 0 || span % static_cast<int64_t>(k + 1) != 0)
      b.fail("ngram_counts " + ir::shape_str(counts) + " do not split pool_int64s into n-grams");
    grams += span / static_cast<int64_t>(k + 1);
  }
  if (static_cast<int64_t>(indexes.size()) != grams)
    b.fail(std::to_string(indexes.size()) + " ngram_indexes for " + std::to_string(grams) +
           " n-grams");
  if (!weights.empty() && static_cast<int64_t>(weights.size()) != grams)
    b.fail(std::to_string(weights.size()) + " weights for " + std::to_string(grams) + " n-grams");
  if (weights.empty()) weights.assign(static_cast<size_t>(grams), 1.f);
  int64_t out = 0;
  for (int64_t i : indexes) {
    if (i < 0) b.fail("negative ngram_index " + std::to_string(i));
    out = std::max(out, i + 1);
  }

  const std::string x =
      x_shape.size() == 2 ? n.inputs[0] : b.op("Reshape", {n.inputs[0], b.ints({1, len})});
  std::vector<std::string> level_counts;  // [N, grams of the level], in pool order
  std::vector<int64_t> counted;           // the pool n-grams those columns hold
  int64_t gram = 0;
  for (size_t k = 0; k + 1 < level_start.size(); ++k) {
    const int64_t width = static_cast<int64_t>(k + 1);
    const int64_t level_grams = (level_start[k + 1] - level_start[k]) / width;
    const int64_t first = gram;
    gram += level_grams;
    if (width < min_n || width > max_n || level_grams == 0) continue;
    std::vector<int64_t> windows;  // (W, width) token positions
    for (int64_t skip = 0; skip <= (width == 1 ? 0 : max_skip); ++skip)
      for (int64_t i = 0; i + (width - 1) * (skip + 1) < len; ++i)
        for (int64_t j = 0; j < width; ++j) windows.push_back(i + j * (skip + 1));
    for (int64_t c = 0; c < level_grams; ++c) counted.push_back(first + c);
    const int64_t w = static_cast<int64_t>(windows.size()) / width;
    if (w == 0) {
      level_counts.push_back(b.constant(ir::Tensor(DType::kF32, {batch, level_grams})));
      continue;
    }
    ir::Tensor level(x_type, {1, 1, level_grams, width});
    for (int64_t e = 0; e < level_grams * width; ++e) {
      const int64_t v = pool[static_cast<size_t>(level_start[k] + e)];
      if (x_type == DType::kI32)
        level.data<int32_t>()[e] = static_cast<int32_t>(v);
      else
        level.data<int64_t>()[e] = v;
    }
    const std::string taken_windows =
        b.op("Gather", {x, b.constant(ir::Tensor::from_i64(windows, {w, 1, width}))},
             {{"axis", Attribute(int64_t{1})}});  // [N, W, 1, width]
    const std::string equal = b.op("Cast", {b.op("Equal", {taken_windows, b.constant(level)})},
                                   {{"to", Attribute(int64_t{onnx::TensorProto::FLOAT})}});
    const std::string match =
        b.op("ReduceMin", {equal},
             {{"axes", Attribute(std::vector<int64_t>{3})}, {"keepdims", Attribute(int64_t{0})}});
    level_counts.push_back(
        b.op("ReduceSum", {match, b.ints({1})}, {{"keepdims", Attribute(int64_t{0})}}));
  }
  // Each counted pool n-gram to its output index, weighted for IDF and TFIDF.
  ir::Tensor scatter(DType::kF32, {static_cast<int64_t>(counted.size()), out});
  for (size_t r = 0; r < counted.size(); ++r) {
    const size_t gi = static_cast<size_t>(counted[r]);
    scatter.data<float>()[static_cast<int64_t>(r) * out + indexes[gi]] =
        mode == "TF" ? 1.f : weights[gi];
  }
  const std::string y_shape =
      b.ints(x_shape.size() == 2 ? std::vector<int64_t>{batch, out} : std::vector<int64_t>{out});
  if (counted.empty()) {
    b.op("Reshape", {b.constant(ir::Tensor(DType::kF32, {batch, out})), y_shape}, {}, n.outputs[0]);
    return std::move(b.nodes);
  }
  std::string c = level_counts.size() == 1
                      ? level_counts[0]
                      : b.op("Concat", level_counts, {{"axis", Attribute(int64_t{1})}});
  if (mode == "IDF") c = b.op("Min", {c, b.scalar(1.f)});
  b.op("Reshape", {b.op("MatMul", {c, b.constant(std::move(scatter))}), y_shape}, {}, n.outputs[0]);
  return std::move(b.nodes);
}

}  // namespace pipetrain::importer::detail
