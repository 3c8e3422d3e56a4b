// Binding datasets to graph inputs: named arrays by name, features to the
// first input left, lossless dtype conversion, and one clear error before any
// step for a missing input, a float array for ids, a bad sample shape, token
// ids beyond the embedding and labels beyond the classes.
#include "executor/data_binding.h"

#include <gtest/gtest.h>

#include "ir/error.h"
#include "tests/executor/test_models.h"

namespace pipetrain {
namespace {

// tied_lm: ids (2, 3) i64 into a 7-row embedding; labels (2, 3) over 7 classes.
data::DataSplit token_split(std::vector<int64_t> ids, std::vector<int64_t> labels) {
  data::DataSplit s;
  s.train.name = "toy";
  s.train.inputs["ids"] = ir::Tensor::from_i64(ids, {2, 3});
  s.train.labels = ir::Tensor::from_i64(labels, {2, 3});
  s.train.num_classes = 7;
  return s;
}

std::string bind_error(const autodiff::TrainingGraph& tg, data::DataSplit s) {
  try {
    exec::bind_dataset(tg.graph, tg.labels, s, "toy", tg.classes, tg.ignore_index);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(DataBinding, NamedArraysFeedTheirInputs) {
  auto tg = testing_models::tied_lm(2);
  EXPECT_EQ(tg.classes, 7);
  EXPECT_EQ(tg.class_axis, 2);
  EXPECT_EQ(exec::id_bound(tg.graph, "ids"), 7);
  auto s = token_split({0, 1, 2, 3, 4, 5}, {1, 2, 3, -100, 5, 6});
  auto b = exec::bind_dataset(tg.graph, tg.labels, s, "toy", tg.classes, tg.ignore_index);
  EXPECT_EQ(b.inputs, (std::vector<std::string>{"ids"}));
  EXPECT_EQ(b.labels, tg.labels);
  data::Batch batch;
  batch.inputs["ids"] = s.train.inputs.at("ids");
  batch.labels = s.train.labels;
  auto feeds = exec::batch_feeds(b, batch);
  EXPECT_EQ(feeds.size(), 2u);
  EXPECT_EQ(feeds.at("ids").dtype(), ir::DType::kI64);
}

TEST(DataBinding, UnnamedFeaturesTakeTheFirstInputAndWiden) {
  auto tg = testing_models::tied_lm(2);
  data::DataSplit s = token_split({0, 1, 2, 3, 4, 5}, {1, 2, 3, 4, 5, 6});
  s.train.features = s.train.inputs.at("ids");
  s.train.inputs.clear();
  exec::bind_dataset(tg.graph, tg.labels, s, "toy", tg.classes);
  EXPECT_FALSE(s.train.features.defined());
  EXPECT_EQ(s.train.inputs.count("ids"), 1u);
  // An MLP's float input takes integer features as floats.
  auto mlp = testing_models::zoo_mlp(2, 3, {4}, 2, 0);
  data::DataSplit f;
  f.train.name = "ints";
  f.train.features = ir::Tensor::from_i64({1, 2, 3, 4, 5, 6}, {2, 3});
  f.train.labels = ir::Tensor::from_i64({0, 1}, {2});
  exec::bind_dataset(mlp.graph, mlp.labels, f, "ints", mlp.classes);
  const ir::Tensor& x = f.train.inputs.at(mlp.graph.inputs[0]);
  EXPECT_EQ(x.dtype(), ir::DType::kF32);
  EXPECT_EQ(x.data<float>()[5], 6.0f);
}

TEST(DataBinding, BadDatasetsGetOneClearError) {
  auto tg = testing_models::tied_lm(2);
  // Missing input, named.
  data::DataSplit s = token_split({0, 1, 2, 3, 4, 5}, {1, 2, 3, 4, 5, 6});
  s.train.inputs["input_ids"] = s.train.inputs.at("ids");
  s.train.inputs.erase("ids");
  std::string e = bind_error(tg, s);
  EXPECT_NE(e.find("array 'input_ids' that no model input takes"), std::string::npos) << e;
  // Float ids.
  s = token_split({0, 1, 2, 3, 4, 5}, {1, 2, 3, 4, 5, 6});
  ir::Tensor f(ir::DType::kF32, {2, 3});
  s.train.inputs["ids"] = f;
  e = bind_error(tg, s);
  EXPECT_NE(e.find("is f32 but the model takes i64"), std::string::npos) << e;
  // Wrong sample shape (a longer sequence than the model's positions).
  s = token_split({0, 1, 2, 3, 4, 5}, {1, 2, 3, 4, 5, 6});
  s.train.inputs["ids"] = ir::Tensor::from_i64({0, 1, 2, 3, 4, 5}, {1, 6});
  s.train.labels = ir::Tensor::from_i64({0, 1, 2, 3, 4, 5}, {1, 6});
  e = bind_error(tg, s);
  EXPECT_NE(e.find("samples of shape (6) but 'ids' takes (3)"), std::string::npos) << e;
  // A token id beyond the embedding's 7 rows.
  e = bind_error(tg, token_split({0, 1, 2, 3, 9, 5}, {1, 2, 3, 4, 5, 6}));
  EXPECT_NE(e.find("id 9 (sample 1, position 1) is outside the rows of the embedding"),
            std::string::npos)
      << e;
  // A label beyond the 7 classes; -100 is fine, -1 is not.
  e = bind_error(tg, token_split({0, 1, 2, 3, 4, 5}, {1, 2, 3, 4, 5, 7}));
  EXPECT_NE(e.find("id 7 (sample 1, position 2) is outside the model's 7 classes"),
            std::string::npos)
      << e;
  e = bind_error(tg, token_split({0, 1, 2, 3, 4, 5}, {1, -1, 3, 4, 5, 6}));
  EXPECT_NE(e.find("id -1"), std::string::npos) << e;
}

}  // namespace
}  // namespace pipetrain
