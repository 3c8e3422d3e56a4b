// Image and tabular classifiers: mlp, lenet, and torchvision's alexnet,
// vgg16 and resnet50 (same modules, names and parameter counts).
#include <string>

#include "ir/error.h"
#include "models/builders.h"
#include "models/layers.h"

namespace pipetrain::models {

namespace {

constexpr int32_t kF32 = onnx::TensorProto::FLOAT;

std::string flatten(OnnxBuilder& b, const std::string& x) {
  return b.op("Flatten", {x}, {attr_int("axis", 1)});
}

// nn.AdaptiveAvgPool2d(out) on a (N, C, in, in) map: nothing when in == out
// (the default image size), an AveragePool when `out` divides `in`.
std::string adaptive_avg_pool(OnnxBuilder& b, const char* model, const std::string& x, int64_t in,
                              int64_t out) {
  if (in == out) return x;
  if (in < out || in % out != 0)
    throw ModelError(std::string(model) + ": image_size gives a " + std::to_string(in) + "x" +
                     std::to_string(in) + " feature map, which AdaptiveAvgPool2d(" +
                     std::to_string(out) + ") cannot pool with a fixed window; use 224");
  auto s = b.scope("avgpool");
  int64_t k = in / out;
  return b.op("AveragePool", {x},
              {attr_ints("kernel_shape", {k, k}), attr_ints("strides", {k, k})});
}

// Output side of a k x k, stride s, pad p window over `in`.
int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t p) {
  return (in + 2 * p - k) / s + 1;
}

}  // namespace

// input (N, in_features) -> [Gemm + Relu] per hidden width -> Gemm -> logits (N, classes).
void build_mlp(OnnxBuilder& b, const ZooOptions& o) {
  int64_t in = option_or("mlp", "in_features", o.in_features, 64);
  int64_t classes = option_or("mlp", "num_classes", o.num_classes, 10);
  std::string x = b.input("input", kF32, {o.batch, in});
  for (size_t i = 0; i < o.hidden.size(); ++i) {
    int64_t width = o.hidden[i];
    if (width < 1) throw ModelError("mlp: hidden width " + std::to_string(width) + " must be >= 1");
    auto s = b.scope("block" + std::to_string(i + 1));
    x = relu(b, "relu", linear(b, "fc", x, in, width));
    in = width;
  }
  b.output(linear(b, "head", x, in, classes, true, "logits"), kF32, {o.batch, classes});
}

// LeNet-5 style for 28x28 Fashion-MNIST:
//   conv5x5(16, pad 2) relu maxpool2 -> (16, 14, 14)
//   conv5x5(32, pad 2) relu maxpool2 -> (32, 7, 7)
//   flatten 1568 -> fc 128 relu -> fc classes
// ~3 MMAC per image forward, 215k parameters.
void build_lenet(OnnxBuilder& b, const ZooOptions& o) {
  int64_t size = option_or("lenet", "image_size", o.image_size, 28, 4);
  int64_t channels = option_or("lenet", "channels", o.channels, 1);
  int64_t classes = option_or("lenet", "num_classes", o.num_classes, 10);
  std::string x = b.input("input", kF32, {o.batch, channels, size, size});
  {
    auto s = b.scope("features");
    x = conv2d(b, "conv1", x, channels, 16, 5, 1, 2, true);
    x = max_pool(b, "pool1", relu(b, "relu1", x), 2, 2, 0);
    x = conv2d(b, "conv2", x, 16, 32, 5, 1, 2, true);
    x = max_pool(b, "pool2", relu(b, "relu2", x), 2, 2, 0);
  }
  int64_t side = size / 4;
  auto s = b.scope("classifier");
  {
    auto f = b.scope("flatten");
    x = flatten(b, x);
  }
  x = relu(b, "relu3", linear(b, "fc1", x, 32 * side * side, 128));
  b.output(linear(b, "fc2", x, 128, classes, true, "logits"), kF32, {o.batch, classes});
}

// torchvision.models.alexnet: 61,100,840 parameters at 1000 classes.
void build_alexnet(OnnxBuilder& b, const ZooOptions& o) {
  int64_t size = option_or("alexnet", "image_size", o.image_size, 224, 63);
  int64_t channels = option_or("alexnet", "channels", o.channels, 3);
  int64_t classes = option_or("alexnet", "num_classes", o.num_classes, 1000);
  const int64_t d = o.width_divisor;
  std::string x = b.input("input", kF32, {o.batch, channels, size, size});
  int64_t side = size;
  {
    auto s = b.scope("features");
    struct Conv {
      int64_t cin, cout, k, stride, pad;
      bool pool_after;
    };
    const Conv convs[] = {{channels, 64 / d, 11, 4, 2, true},
                          {64 / d, 192 / d, 5, 1, 2, true},
                          {192 / d, 384 / d, 3, 1, 1, false},
                          {384 / d, 256 / d, 3, 1, 1, false},
                          {256 / d, 256 / d, 3, 1, 1, true}};
    int index = 0;
    for (const Conv& c : convs) {
      x = conv2d(b, std::to_string(index++), x, c.cin, c.cout, c.k, c.stride, c.pad, true);
      side = window_out(side, c.k, c.stride, c.pad);
      x = relu(b, std::to_string(index++), x);
      if (c.pool_after) {
        x = max_pool(b, std::to_string(index++), x, 3, 2, 0);
        side = window_out(side, 3, 2, 0);
      }
    }
  }
  x = flatten(b, adaptive_avg_pool(b, "alexnet", x, side, 6));
  auto s = b.scope("classifier");
  const int64_t fc = 4096 / d;
  x = dropout(b, "0", x, 0.5f);
  x = relu(b, "2", linear(b, "1", x, 256 / d * 6 * 6, fc));
  x = dropout(b, "3", x, 0.5f);
  x = relu(b, "5", linear(b, "4", x, fc, fc));
  b.output(linear(b, "6", x, fc, classes, true, "logits"), kF32, {o.batch, classes});
}

// torchvision.models.vgg16 (configuration D, no batch norm): 138,357,544
// parameters at 1000 classes; with o.batch_norm vgg16_bn (a BatchNorm2d
// after every convolution, numbered between it and its ReLU): 138,365,992.
void build_vgg16(OnnxBuilder& b, const ZooOptions& o) {
  int64_t size = option_or("vgg16", "image_size", o.image_size, 224, 32);
  int64_t channels = option_or("vgg16", "channels", o.channels, 3);
  int64_t classes = option_or("vgg16", "num_classes", o.num_classes, 1000);
  std::string x = b.input("input", kF32, {o.batch, channels, size, size});
  constexpr int64_t kPool = 0;
  const int64_t cfg[] = {64,    64,  kPool, 128, 128,   kPool, 256, 256, 256,
                         kPool, 512, 512,   512, kPool, 512,   512, 512, kPool};
  int64_t side = size, cin = channels;
  {
    auto s = b.scope("features");
    int index = 0;
    for (int64_t v : cfg) {
      if (v == kPool) {
        x = max_pool(b, std::to_string(index++), x, 2, 2, 0);
        side /= 2;
        continue;
      }
      x = conv2d(b, std::to_string(index++), x, cin, v / o.width_divisor, 3, 1, 1, true);
      if (o.batch_norm) x = batch_norm(b, std::to_string(index++), x, v / o.width_divisor);
      x = relu(b, std::to_string(index++), x);
      cin = v / o.width_divisor;
    }
  }
  x = flatten(b, adaptive_avg_pool(b, "vgg16", x, side, 7));
  auto s = b.scope("classifier");
  const int64_t fc = 4096 / o.width_divisor;
  x = relu(b, "1", linear(b, "0", x, cin * 7 * 7, fc));
  x = dropout(b, "2", x, 0.5f);
  x = relu(b, "4", linear(b, "3", x, fc, fc));
  x = dropout(b, "5", x, 0.5f);
  b.output(linear(b, "6", x, fc, classes, true, "logits"), kF32, {o.batch, classes});
}

namespace {

// torchvision's Bottleneck (v1.5: the stride sits on the 3x3 conv):
// 1x1 (planes) -> 3x3 (planes, stride) -> 1x1 (4 planes), each with batch
// norm, plus the identity or a strided 1x1 projection, then relu.
std::string bottleneck(OnnxBuilder& b, const std::string& x, int64_t inplanes, int64_t planes,
                       int64_t stride, bool downsample) {
  std::string y = conv2d(b, "conv1", x, inplanes, planes, 1, 1, 0, false);
  y = relu(b, "relu", batch_norm(b, "bn1", y, planes));
  y = conv2d(b, "conv2", y, planes, planes, 3, stride, 1, false);
  y = relu(b, "relu", batch_norm(b, "bn2", y, planes));
  y = conv2d(b, "conv3", y, planes, 4 * planes, 1, 1, 0, false);
  y = batch_norm(b, "bn3", y, 4 * planes);
  std::string identity = x;
  if (downsample) {
    auto s = b.scope("downsample");
    identity = conv2d(b, "0", x, inplanes, 4 * planes, 1, stride, 0, false);
    identity = batch_norm(b, "1", identity, 4 * planes);
  }
  return relu(b, "relu", b.op("Add", {y, identity}));
}

}  // namespace

// torchvision.models.resnet50: 25,557,032 parameters at 1000 classes.
void build_resnet50(OnnxBuilder& b, const ZooOptions& o) {
  int64_t size = option_or("resnet50", "image_size", o.image_size, 224, 32);
  int64_t channels = option_or("resnet50", "channels", o.channels, 3);
  int64_t classes = option_or("resnet50", "num_classes", o.num_classes, 1000);
  std::string x = b.input("input", kF32, {o.batch, channels, size, size});
  const int64_t d = o.width_divisor;
  x = conv2d(b, "conv1", x, channels, 64 / d, 7, 2, 3, false);
  x = relu(b, "relu", batch_norm(b, "bn1", x, 64 / d));
  x = max_pool(b, "maxpool", x, 3, 2, 1);
  const int64_t blocks[] = {3, 4, 6, 3};
  int64_t inplanes = 64 / d;
  for (int stage = 0; stage < 4; ++stage) {
    auto s = b.scope("layer" + std::to_string(stage + 1));
    int64_t planes = (int64_t{64} << stage) / d;
    for (int64_t i = 0; i < blocks[stage]; ++i) {
      auto block = b.scope(std::to_string(i));
      int64_t stride = i == 0 && stage > 0 ? 2 : 1;
      x = bottleneck(b, x, inplanes, planes, stride, i == 0);
      inplanes = 4 * planes;
    }
  }
  {
    auto s = b.scope("avgpool");
    x = b.op("GlobalAveragePool", {x});
  }
  x = flatten(b, x);
  b.output(linear(b, "fc", x, inplanes, classes, true, "logits"), kF32, {o.batch, classes});
}

}  // namespace pipetrain::models
