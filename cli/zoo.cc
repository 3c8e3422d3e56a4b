// `pipetrain zoo list` and `pipetrain zoo export NAME -o model.onnx`: the
// model zoo (models/zoo.h). The group takes further subcommands from other
// files (add_zoo_command returns it).
#include <fmt/core.h>

#include <memory>

#include "cli/commands.h"
#include "models/zoo.h"

namespace pipetrain::cli {

namespace {

struct ExportArgs {
  std::string name;
  std::string output;
  models::ZooOptions options;
  bool no_weights = false;
};

void list_models() {
  fmt::print("{:<9} {:>13} {:>13}  {}\n", "name", "params", "published", "description");
  for (const auto& e : models::zoo_entries()) {
    fmt::print("{:<9} {:>13} {:>13}  {}\n", e.name, models::zoo_param_count(e.name, {}),
               e.published_params, e.description);
  }
  fmt::print(
      "params: as built at the defaults; published: the reference figure (source with "
      "`zoo list --sources`)\n");
}

void list_sources() {
  for (const auto& e : models::zoo_entries())
    fmt::print("{:<9} {:>13}  {}\n", e.name, e.published_params, e.source);
}

void export_model(const ExportArgs& a) {
  models::ZooOptions o = a.options;
  o.weights = !a.no_weights;
  models::write_zoo_model(a.name, o, a.output);
  fmt::print("wrote {} ({} parameters{}) to {}\n", a.name, models::zoo_param_count(a.name, o),
             o.weights ? "" : ", no weight values", a.output);
}

}  // namespace

CLI::App* add_zoo_command(CLI::App& app) {
  auto* zoo = app.add_subcommand("zoo", "Built-in models written as ONNX: list, export");
  zoo->require_subcommand(1);

  auto* list = zoo->add_subcommand("list", "Models with their parameter counts");
  auto sources = std::make_shared<bool>(false);
  list->add_flag("--sources", *sources, "Where each published figure comes from");
  list->callback([sources] { *sources ? list_sources() : list_models(); });

  auto* exp = zoo->add_subcommand("export", "Write a zoo model as an ONNX file");
  auto a = std::make_shared<ExportArgs>();
  exp->add_option("name", a->name, "Model name (see `pipetrain zoo list`)")->required();
  exp->add_option("-o,--output", a->output, "Output .onnx path")->required();
  exp->add_option("--batch", a->options.batch,
                  "Fixed batch size (default: symbolic \"N\", bound by --batch at import)");
  exp->add_option("--classes", a->options.num_classes, "Classifier outputs (default per model)");
  exp->add_option("--seed", a->options.seed, "Seed of the weight initialisation")
      ->capture_default_str();
  exp->add_option("--image-size", a->options.image_size, "Square image side (default per model)");
  exp->add_option("--channels", a->options.channels, "Image channels (default per model)");
  exp->add_option("--seq-len", a->options.seq_len, "Tokens per sequence (default per model)");
  exp->add_option("--in-features", a->options.in_features, "mlp: input features")
      ->capture_default_str();
  exp->add_option("--hidden", a->options.hidden, "mlp: hidden widths")->delimiter(',');
  exp->add_option("--width-divisor", a->options.width_divisor,
                  "Divide every width of the big models by this (1, 2, 4, ..., 64)")
      ->capture_default_str();
  exp->add_option("--layers", a->options.num_layers, "bert, gpt2: transformer blocks (default 12)");
  exp->add_option("--vocab", a->options.vocab_size,
                  "bert, gpt2: vocabulary size (default: the published one / --width-divisor; "
                  "256 fits the byte-level tokenizer)");
  exp->add_flag("--batch-norm", a->options.batch_norm,
                "vgg16: a BatchNorm after every convolution (torchvision's vgg16_bn)");
  exp->add_flag("--no-weights", a->no_weights,
                "Write randomly initialised parameters as zeros (fast; for partitioning)");
  exp->callback([a] { export_model(*a); });
  return zoo;
}

}  // namespace pipetrain::cli
