// The model zoo: every model imports and verifies, parameter counts match the
// published figures, mlp and lenet compute what their architecture says
// (checked against plain loops over the written weights), weights are
// deterministic and initialised with PyTorch's bounds.
#include "models/zoo.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include <unistd.h>

#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "importer/importer.h"
#include "ir/error.h"

namespace pipetrain {
namespace {

using models::ZooOptions;

ir::Graph import(const onnx::ModelProto& m, int64_t batch, int layer_depth = 0) {
  std::string bytes;
  EXPECT_TRUE(m.SerializeToString(&bytes));
  importer::ImportOptions opts;
  opts.batch = batch;
  opts.layer_depth = layer_depth;
  return importer::import_model_bytes(bytes, ".", opts);
}

// An initializer's values by name (the test's own reading of the model).
std::vector<float> weights(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) {
      std::vector<float> v(t.raw_data().size() / sizeof(float));
      std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
      return v;
    }
  ADD_FAILURE() << "no initializer " << name;
  return {};
}

ir::Tensor random_input(ir::Shape shape, uint64_t seed) {
  ir::Tensor t(ir::DType::kF32, shape);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = static_cast<float>(static_cast<double>(rng() >> 11) / 9007199254740992.0);
  return t;
}

// y (N, out) = x (N, in) W^T + b, W (out, in).
std::vector<float> ref_linear(const std::vector<float>& x, int64_t n, int64_t in,
                              const std::vector<float>& w, const std::vector<float>& b,
                              int64_t out) {
  std::vector<float> y(static_cast<size_t>(n * out));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b[o];
      for (int64_t k = 0; k < in; ++k) acc += double(x[i * in + k]) * w[o * in + k];
      y[i * out + o] = static_cast<float>(acc);
    }
  return y;
}

void ref_relu(std::vector<float>& x) {
  for (float& v : x) v = std::max(v, 0.0f);
}

// 5x5 convolution, pad 2, stride 1: x (N, C, H, H) -> (N, K, H, H).
std::vector<float> ref_conv5(const std::vector<float>& x, int64_t n, int64_t c, int64_t h,
                             const std::vector<float>& w, const std::vector<float>& b, int64_t k) {
  std::vector<float> y(static_cast<size_t>(n * k * h * h));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < k; ++o)
      for (int64_t r = 0; r < h; ++r)
        for (int64_t s = 0; s < h; ++s) {
          double acc = b[o];
          for (int64_t ci = 0; ci < c; ++ci)
            for (int64_t dr = 0; dr < 5; ++dr)
              for (int64_t ds = 0; ds < 5; ++ds) {
                int64_t rr = r + dr - 2, ss = s + ds - 2;
                if (rr < 0 || rr >= h || ss < 0 || ss >= h) continue;
                acc += double(x[((i * c + ci) * h + rr) * h + ss]) *
                       w[((o * c + ci) * 5 + dr) * 5 + ds];
              }
          y[((i * k + o) * h + r) * h + s] = static_cast<float>(acc);
        }
  return y;
}

// 2x2 max pool, stride 2: (N, C, H, H) -> (N, C, H/2, H/2).
std::vector<float> ref_pool2(const std::vector<float>& x, int64_t nc, int64_t h) {
  int64_t q = h / 2;
  std::vector<float> y(static_cast<size_t>(nc * q * q));
  for (int64_t i = 0; i < nc; ++i)
    for (int64_t r = 0; r < q; ++r)
      for (int64_t s = 0; s < q; ++s) {
        const float* p = &x[(i * h + 2 * r) * h + 2 * s];
        y[(i * q + r) * q + s] = std::max({p[0], p[1], p[h], p[h + 1]});
      }
  return y;
}

void expect_close(const ir::Tensor& got, const std::vector<float>& want) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  float scale = 0;
  for (float v : want) scale = std::max(scale, std::abs(v));
  ASSERT_GT(scale, 0.0f);
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got.data<float>()[i], want[i], 1e-4f * scale) << "element " << i;
}

// One thread: the test runs next to other builds, where OpenMP teams of two
// spin against each other and take seconds.
std::map<std::string, ir::Tensor> run_forward(const ir::Graph& g, const ir::Tensor& x) {
  exec::set_cpu_threads(1);
  auto backend = exec::make_cpu_backend();
  exec::ForwardRunner runner(g, *backend);
  return runner.run({{"input", x}});
}

TEST(Zoo, MlpComputesItsLayers) {
  ZooOptions o;
  o.seed = 3;
  onnx::ModelProto m = models::build_zoo_model("mlp", o);
  ir::Graph g = import(m, 5, 1);
  EXPECT_EQ(g.param_count(), 17226);
  EXPECT_EQ(g.param_count(), models::zoo_entry("mlp").published_params);
  EXPECT_EQ(g.tensor("input").shape, (ir::Shape{5, 64}));
  EXPECT_EQ(g.tensor("logits").shape, (ir::Shape{5, 10}));
  std::vector<std::string> layers;
  for (const auto& l : g.layers) layers.push_back(l.name);
  EXPECT_EQ(layers, (std::vector<std::string>{"block1", "block2", "head"}));

  ir::Tensor x = random_input({5, 64}, 11);
  auto out = run_forward(g, x);
  std::vector<float> h(x.data<float>(), x.data<float>() + x.numel());
  h = ref_linear(h, 5, 64, weights(m, "block1.fc.weight"), weights(m, "block1.fc.bias"), 128);
  ref_relu(h);
  h = ref_linear(h, 5, 128, weights(m, "block2.fc.weight"), weights(m, "block2.fc.bias"), 64);
  ref_relu(h);
  h = ref_linear(h, 5, 64, weights(m, "head.weight"), weights(m, "head.bias"), 10);
  expect_close(out.at("logits"), h);
}

TEST(Zoo, MlpTakesItsWidthsFromOptions) {
  ZooOptions o;
  o.in_features = 20;
  o.hidden = {7};
  o.num_classes = 3;
  ir::Graph g = import(models::build_zoo_model("mlp", o), 2);
  EXPECT_EQ(g.param_count(), 20 * 7 + 7 + 7 * 3 + 3);
  EXPECT_EQ(models::zoo_param_count("mlp", o), 20 * 7 + 7 + 7 * 3 + 3);
  o.hidden = {0};
  EXPECT_THROW(models::build_zoo_model("mlp", o), ModelError);
}

TEST(Zoo, LenetComputesItsLayers) {
  onnx::ModelProto m = models::build_zoo_model("lenet", {});
  ir::Graph g = import(m, 2, 1);
  EXPECT_EQ(g.param_count(), 215370);
  EXPECT_EQ(g.param_count(), models::zoo_entry("lenet").published_params);
  EXPECT_EQ(g.tensor("input").shape, (ir::Shape{2, 1, 28, 28}));
  EXPECT_EQ(g.tensor("logits").shape, (ir::Shape{2, 10}));
  std::vector<std::string> layers;
  for (const auto& l : g.layers) layers.push_back(l.name);
  EXPECT_EQ(layers, (std::vector<std::string>{"features", "classifier"}));

  ir::Tensor x = random_input({2, 1, 28, 28}, 5);
  auto out = run_forward(g, x);
  std::vector<float> h(x.data<float>(), x.data<float>() + x.numel());
  h = ref_conv5(h, 2, 1, 28, weights(m, "features.conv1.weight"), weights(m, "features.conv1.bias"),
                16);
  ref_relu(h);
  h = ref_pool2(h, 2 * 16, 28);
  h = ref_conv5(h, 2, 16, 14, weights(m, "features.conv2.weight"),
                weights(m, "features.conv2.bias"), 32);
  ref_relu(h);
  h = ref_pool2(h, 2 * 32, 14);  // (2, 32, 7, 7), flattened in C, H, W order
  h = ref_linear(h, 2, 1568, weights(m, "classifier.fc1.weight"), weights(m, "classifier.fc1.bias"),
                 128);
  ref_relu(h);
  h = ref_linear(h, 2, 128, weights(m, "classifier.fc2.weight"), weights(m, "classifier.fc2.bias"),
                 10);
  expect_close(out.at("logits"), h);
}

TEST(Zoo, LenetLayersByModuleAtDepthTwo) {
  ir::Graph g = import(models::build_zoo_model("lenet", {}), 1, 2);
  std::vector<std::string> layers;
  for (const auto& l : g.layers) layers.push_back(l.name);
  // The ReLUs after the convolutions are fused into them (ir/passes/fusion.h)
  // and so belong to their layers; the one after fc1 stays its own.
  EXPECT_EQ(layers, (std::vector<std::string>{"conv1", "pool1", "conv2", "pool2", "flatten", "fc1",
                                              "relu3", "fc2"}));
}

// kaiming_uniform(a = sqrt(5)) on a conv is U(-1/sqrt(fan_in), 1/sqrt(fan_in)):
// fan_in = 16 * 5 * 5 = 400 for lenet's conv2, bound 0.05. 12,800 draws
// reach within 1% of the bound and have mean ~ 0 (sd of the mean 2.6e-4).
TEST(Zoo, WeightsFollowPyTorchBoundsAndSeed) {
  ZooOptions o;
  onnx::ModelProto a = models::build_zoo_model("lenet", o);
  std::vector<float> w = weights(a, "features.conv2.weight");
  ASSERT_EQ(w.size(), 12800u);
  float lo = 1, hi = -1;
  double mean = 0;
  for (float v : w) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    mean += v / static_cast<double>(w.size());
  }
  EXPECT_LT(hi, 0.05f);
  EXPECT_GE(lo, -0.05f);
  EXPECT_GT(hi, 0.0495f);
  EXPECT_LT(lo, -0.0495f);
  EXPECT_NEAR(mean, 0.0, 1.5e-3);

  std::string bytes_a, bytes_b, bytes_c;
  a.SerializeToString(&bytes_a);
  models::build_zoo_model("lenet", o).SerializeToString(&bytes_b);
  EXPECT_EQ(bytes_a, bytes_b);  // same seed, same bytes
  o.seed = 1;
  onnx::ModelProto c = models::build_zoo_model("lenet", o);
  EXPECT_NE(weights(c, "features.conv2.weight"), w);

  // weights = false: same graph, random parameters zero.
  o.weights = false;
  onnx::ModelProto z = models::build_zoo_model("lenet", o);
  for (float v : weights(z, "features.conv2.weight")) ASSERT_EQ(v, 0.0f);
  EXPECT_EQ(z.graph().node_size(), a.graph().node_size());
}

// Published parameter counts, counted while building without weight values
// (the big models' data would take seconds to write and import; the next
// test shows the count is the importer's Graph::param_count()).
//   torchvision (torchvision.models.X().parameters(), 1000 classes):
//     alexnet 61,100,840; vgg16 138,357,544; vgg16_bn 138,365,992; resnet50 25,557,032.
//   HF bert-base-uncased BertModel incl. pooler 109,482,240, + classifier 768 * 2 + 2.
//   HF gpt2 with the lm_head tied to wte: 124,439,808.
//   GNMT-8 (PipeDream gnmt_large, derivation in models/gnmt.cc): 277,718,593,
//     which the same nn.Embedding / nn.LSTM / nn.Linear modules give in torch.
TEST(Zoo, BigModelsHaveTheirPublishedParameterCounts) {
  EXPECT_EQ(models::zoo_param_count("alexnet", {}), 61100840);
  EXPECT_EQ(models::zoo_param_count("vgg16", {}), 138357544);
  models::ZooOptions bn;
  bn.batch_norm = true;  // torchvision's vgg16_bn
  EXPECT_EQ(models::zoo_param_count("vgg16", bn), 138365992);
  EXPECT_EQ(models::zoo_param_count("resnet50", {}), 25557032);
  EXPECT_EQ(models::zoo_param_count("bert", {}), 109482240 + 768 * 2 + 2);
  EXPECT_EQ(models::zoo_param_count("gpt2", {}), 124439808);
  EXPECT_EQ(models::zoo_param_count("gnmt", {}), 277718593);
  for (const auto& e : models::zoo_entries()) {
    int64_t head = e.name == "bert" ? 768 * 2 + 2 : 0;
    EXPECT_EQ(models::zoo_param_count(e.name, {}), e.published_params + head) << e.name;
  }
  ZooOptions o;
  o.num_classes = 10;
  EXPECT_EQ(models::zoo_param_count("resnet50", o), 25557032 - 2049 * 990);
}

// Closed forms at hidden h, FFN f, vocabulary v (see models/gnmt.cc and
// models/transformer.cc for the derivations).
int64_t gnmt_params(int64_t h, int64_t v) {
  int64_t lstm_h = 4 * h * (h + h) + 8 * h, lstm_2h = 4 * h * (2 * h + h) + 8 * h;
  return 2 * v * h + 2 * lstm_h + lstm_2h + 6 * lstm_h + lstm_h + (2 * h * h + 2 * h + 1) +
         7 * lstm_2h + h * v + v;
}
int64_t transformer_layer_params(int64_t h, int64_t f) {
  return 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
}
int64_t bert_params(int64_t h, int64_t f, int64_t v, int64_t classes) {
  return (v + 512 + 2) * h + 2 * h + 12 * transformer_layer_params(h, f) + h * h + h + h * classes +
         classes;
}
int64_t gpt2_params(int64_t h, int64_t f, int64_t v) {
  return (v + 1024) * h + 12 * transformer_layer_params(h, f) + 2 * h;
}

struct Imported {
  onnx::ModelProto model;
  ir::Graph graph;
};

// The model at 1/16 width: same graph, imported (which verifies it) with
// batch 2 and layers at depth 2.
Imported narrow(const std::string& name, int64_t seq_len = 0) {
  ZooOptions o;
  o.width_divisor = 16;
  o.seq_len = seq_len;
  o.seed = 7;
  Imported r{models::build_zoo_model(name, o), {}};
  r.graph = import(r.model, 2, 2);
  EXPECT_EQ(r.graph.param_count(), models::zoo_param_count(name, o)) << name;
  return r;
}

bool has_layer(const ir::Graph& g, const std::string& name) {
  for (const auto& l : g.layers)
    if (l.name == name) return true;
  return false;
}

bool all_finite(const ir::Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.data<float>()[i])) return false;
  return true;
}

// At 1/16 width; the forward runs at the smallest input each model takes
// (resnet50 pools globally; alexnet's and vgg16's fixed adaptive pools need
// 224, and vgg16 at 224 is too slow for a unit test, so it only imports).
TEST(Zoo, ImageModelsImportAndRun) {
  Imported a = narrow("alexnet");
  EXPECT_EQ(a.graph.tensor("input").shape, (ir::Shape{2, 3, 224, 224}));
  EXPECT_EQ(a.graph.tensor("logits").shape, (ir::Shape{2, 1000}));
  EXPECT_TRUE(has_layer(a.graph, "features.0"));
  EXPECT_TRUE(has_layer(a.graph, "classifier.6"));
  EXPECT_TRUE(all_finite(run_forward(a.graph, random_input({2, 3, 224, 224}, 1)).at("logits")));

  Imported v = narrow("vgg16");
  EXPECT_EQ(v.graph.tensor("logits").shape, (ir::Shape{2, 1000}));
  EXPECT_TRUE(has_layer(v.graph, "features.28"));  // the 13th conv
  EXPECT_EQ(v.graph.params().size(), 32u);         // 16 weights and biases

  ZooOptions o;
  o.width_divisor = 16;
  o.image_size = 64;
  ir::Graph r = import(models::build_zoo_model("resnet50", o), 2, 2);
  EXPECT_EQ(r.param_count(), models::zoo_param_count("resnet50", o));
  EXPECT_TRUE(has_layer(r, "layer1.0"));
  EXPECT_TRUE(has_layer(r, "layer4.2"));
  EXPECT_EQ(r.nodes[0].name, "/conv1/Conv");
  EXPECT_TRUE(r.has_value("layer1.0.downsample.0.weight"));
  EXPECT_EQ(r.tensor("layer1.0.bn1.running_mean").role, ir::Role::kBuffer);
  auto out = run_forward(r, random_input({2, 3, 64, 64}, 2)).at("logits");
  EXPECT_EQ(out.shape(), (ir::Shape{2, 1000}));
  EXPECT_TRUE(all_finite(out));
}

std::map<std::string, ir::Tensor> run_ids(const ir::Graph& g,
                                          const std::map<std::string, ir::Tensor>& feeds) {
  exec::set_cpu_threads(1);
  auto backend = exec::make_cpu_backend();
  exec::ForwardRunner runner(g, *backend);
  return runner.run(feeds);
}

ir::Tensor token_ids(int64_t n, int64_t seq, int64_t vocab, uint64_t seed) {
  ir::Tensor t(ir::DType::kI64, {n, seq});
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = int64_t(rng() % vocab);
  return t;
}

// Largest |a - b| over positions [from, to) of the sequence axis of (N, S, V) logits.
float max_diff(const ir::Tensor& a, const ir::Tensor& b, int64_t from, int64_t to) {
  const auto& s = a.shape();
  float worst = 0;
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t t = from; t < to; ++t)
      for (int64_t v = 0; v < s[2]; ++v) {
        int64_t i = (n * s[1] + t) * s[2] + v;
        worst = std::max(worst, std::abs(a.data<float>()[i] - b.data<float>()[i]));
      }
  return worst;
}

// GPT-2 is causal: changing the last token changes the last position's
// logits only.
TEST(Zoo, Gpt2ImportsAndIsCausal) {
  Imported m = narrow("gpt2", 16);
  EXPECT_EQ(m.graph.param_count(), gpt2_params(48, 192, 50257 / 16));
  EXPECT_TRUE(has_layer(m.graph, "h.11"));
  EXPECT_EQ(m.graph.tensor("logits").shape, (ir::Shape{2, 16, 3141}));
  ir::Tensor ids = token_ids(2, 16, 3141, 3);
  auto a = run_ids(m.graph, {{"input_ids", ids}}).at("logits");
  ir::Tensor changed = ids.clone();
  changed.data<int64_t>()[15] = (ids.data<int64_t>()[15] + 1) % 3141;
  auto b = run_ids(m.graph, {{"input_ids", changed}}).at("logits");
  EXPECT_TRUE(all_finite(a));
  EXPECT_EQ(max_diff(a, b, 0, 15), 0.0f);
  EXPECT_GT(max_diff(a, b, 15, 16), 1e-6f);
}

TEST(Zoo, BertImportsAndAttendsBothWays) {
  Imported m = narrow("bert", 16);
  EXPECT_EQ(m.graph.param_count(), bert_params(48, 192, 30522 / 16, 2));
  EXPECT_TRUE(has_layer(m.graph, "layer.11"));
  EXPECT_EQ(m.graph.tensor("logits").shape, (ir::Shape{2, 2}));
  ir::Tensor ids = token_ids(2, 16, 30522 / 16, 4);
  auto a = run_ids(m.graph, {{"input_ids", ids}}).at("logits");
  ir::Tensor changed = ids.clone();
  changed.data<int64_t>()[15] = (ids.data<int64_t>()[15] + 1) % (30522 / 16);
  auto b = run_ids(m.graph, {{"input_ids", changed}}).at("logits");
  EXPECT_TRUE(all_finite(a));
  // The pooled first token sees the last one: sample 0's logits move.
  EXPECT_GT(std::abs(a.data<float>()[0] - b.data<float>()[0]), 1e-7f);
  EXPECT_EQ(a.data<float>()[2], b.data<float>()[2]);  // sample 1 untouched
}

// GNMT's decoder is causal in the target: changing the last target token
// changes the last position's logits only; changing a source token changes
// every position (through attention).
TEST(Zoo, GnmtImportsAndDecodesCausally) {
  Imported m = narrow("gnmt", 6);
  EXPECT_EQ(m.graph.param_count(), gnmt_params(64, 32320 / 16));
  EXPECT_TRUE(has_layer(m.graph, "rnn_layers.7"));
  EXPECT_TRUE(has_layer(m.graph, "att_rnn"));
  EXPECT_EQ(m.graph.tensor("logits").shape, (ir::Shape{2, 6, 2020}));
  ir::Tensor src = token_ids(2, 6, 2020, 5), tgt = token_ids(2, 6, 2020, 6);
  auto a = run_ids(m.graph, {{"source", src}, {"target", tgt}}).at("logits");
  ir::Tensor tgt2 = tgt.clone();
  tgt2.data<int64_t>()[5] = (tgt.data<int64_t>()[5] + 1) % 2020;
  auto b = run_ids(m.graph, {{"source", src}, {"target", tgt2}}).at("logits");
  EXPECT_TRUE(all_finite(a));
  EXPECT_EQ(max_diff(a, b, 0, 5), 0.0f);
  EXPECT_GT(max_diff(a, b, 5, 6), 1e-7f);
  ir::Tensor src2 = src.clone();
  src2.data<int64_t>()[5] = (src.data<int64_t>()[5] + 1) % 2020;
  auto c = run_ids(m.graph, {{"source", src2}, {"target", tgt}}).at("logits");
  EXPECT_GT(max_diff(a, c, 0, 1), 1e-7f);
}

TEST(Zoo, FixedBatchIsWrittenIntoTheInput) {
  ZooOptions o;
  o.batch = 3;
  onnx::ModelProto m = models::build_zoo_model("lenet", o);
  EXPECT_EQ(m.graph().input(0).type().tensor_type().shape().dim(0).dim_value(), 3);
  ir::Graph g = importer::import_model_bytes(m.SerializeAsString(), ".", {});
  EXPECT_EQ(g.tensor("logits").shape, (ir::Shape{3, 10}));
  EXPECT_EQ(m.opset_import(0).version(), 17);
  EXPECT_EQ(m.ir_version(), 8);
}

TEST(Zoo, BadNamesAndOptionsAreErrors) {
  try {
    models::build_zoo_model("resnet51", {});
    FAIL() << "no error";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown zoo model 'resnet51'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("resnet50"), std::string::npos);
  }
  ZooOptions o;
  o.num_classes = -2;
  EXPECT_THROW(models::build_zoo_model("lenet", o), ModelError);
  o = {};
  o.image_size = 100;  // a 2x2 map after vgg16's features: no fixed AdaptiveAvgPool2d(7)
  EXPECT_THROW(models::zoo_param_count("vgg16", o), ModelError);
  o = {};
  o.batch = -1;
  EXPECT_THROW(models::build_zoo_model("mlp", o), ModelError);
}

TEST(Zoo, WriteIsAtomicAndImports) {
  auto dir =
      std::filesystem::temp_directory_path() / ("pipetrain_zoo_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "mlp.onnx").string();
  models::write_zoo_model("mlp", {}, path);
  importer::ImportOptions opts;
  opts.batch = 2;
  EXPECT_EQ(importer::import_model(path, opts).param_count(), 17226);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);  // no temporary left behind
  EXPECT_THROW(models::write_zoo_model("mlp", {}, (dir / "no" / "such" / "m.onnx").string()),
               ModelError);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain
