// The import pipeline: parse, check ops, validate with libonnx (opsets it
// knows), convert old opsets, build the graph, rewrite/fold/infer, verify,
// layer. Every failure surfaces as ModelError or UnsupportedOp prefixed with
// the model's name.
#include "importer/importer.h"

#include <onnx/checker.h>

#include <filesystem>
#include <fstream>

#include "importer/internal.h"
#include "ir/error.h"
#include "ir/passes/fusion.h"

namespace pipetrain::importer {

namespace {

// libonnx 1.12 knows default-domain opsets up to 17 and IR version 8.
constexpr int64_t kMinOpset = 11, kMaxOpset = 21, kMaxLibonnxOpset = 17;
constexpr int64_t kMaxLibonnxIrVersion = 8;

// libonnx's checker stats external data files relative to the working
// directory when it checks a ModelProto (only its path overload knows the
// model's directory). Point the locations at base_dir while it runs; the
// reader later applies its own, stricter checks to the original locations.
void check_with_libonnx(onnx::ModelProto& model, const std::string& base_dir) {
  std::vector<std::pair<onnx::StringStringEntryProto*, std::string>> moved;
  auto redirect = [&](onnx::TensorProto* t) {
    if (t->data_location() != onnx::TensorProto_DataLocation_EXTERNAL) return;
    std::string file = detail::external_file(*t, base_dir, "tensor '" + t->name() + "'");
    for (auto& kv : *t->mutable_external_data())
      if (kv.key() == "location") {
        moved.emplace_back(&kv, kv.value());
        kv.set_value(file);
      }
  };
  auto* graph = model.mutable_graph();
  for (auto& init : *graph->mutable_initializer()) redirect(&init);
  for (auto& node : *graph->mutable_node())
    for (auto& attr : *node.mutable_attribute())
      if (attr.has_t()) redirect(attr.mutable_t());
  std::string error;
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    error = e.what();
  }
  for (auto& [kv, location] : moved) kv->set_value(location);
  if (!error.empty()) throw ModelError("the model is not valid ONNX: " + error);
}

ir::Graph import_proto(onnx::ModelProto& model, const std::string& base_dir,
                       const ImportOptions& options) {
  if (!model.has_graph()) throw ModelError("the model has no graph");
  if (options.half_as_float32) detail::widen_half_floats(&model, base_dir);
  const auto names = detail::node_names(model.graph());
  detail::check_ops_supported(model.graph(), names);
  int64_t opset = detail::default_opset(model);
  if (opset > kMaxOpset)
    throw UnsupportedOp("opset " + std::to_string(opset) + " is newer than pipetrain supports (" +
                        std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + ")");
  detail::check_structure(model.graph(), names);

  const bool libonnx_knows = opset <= kMaxLibonnxOpset;
  if (libonnx_knows && model.ir_version() <= kMaxLibonnxIrVersion) {
    check_with_libonnx(model, base_dir);
  }
  const int64_t source_opset = opset;
  if (opset < kMinOpset) {
    // Our own reading of the original model validates every tensor and
    // attribute first: libonnx's converter is not hardened against malformed input.
    detail::graph_from_model(model, opset, base_dir, options);
    const onnx::GraphProto declared = model.graph();
    model = detail::convert_opset(model, opset, kMinOpset);
    // libonnx's Scan 8-to-9 adapter strips the batch axis off the types of the
    // values it touches, graph inputs and outputs included: the file's types stand.
    auto restore = [](auto* converted, const auto& original) {
      for (auto& vi : *converted)
        for (const auto& o : original)
          if (o.name() == vi.name()) *vi.mutable_type() = o.type();
    };
    restore(model.mutable_graph()->mutable_input(), declared.input());
    restore(model.mutable_graph()->mutable_output(), declared.output());
    opset = kMinOpset;
    detail::check_ops_supported(model.graph(), detail::node_names(model.graph()));
  }

  ir::Graph g = detail::graph_from_model(model, opset, base_dir, options);
  g.source_opset = source_opset;
  detail::infer_and_fold(g, options.fold_constants);
  // Identities first: exporters share equal initializers through them (every
  // fresh BatchNorm's scale and bias), and the fusions look for values.
  detail::elide_identities(g);
  if (options.fuse) ir::passes::fuse(g, options.inference);
  detail::drop_unused_values(g);
  g.sort_topologically();
  g.infer_shapes();
  if (libonnx_knows) detail::check_against_onnx_shapes(model, g);
  g.verify();
  detail::assign_layers(g, options.layer_depth);
  g.verify();
  return g;
}

// Runs `body`, prefixing every error with `origin` and turning foreign
// exceptions (libonnx, protobuf, std) into ModelError.
template <typename F>
ir::Graph with_origin(const std::string& origin, F&& body) {
  try {
    return body();
  } catch (const UnsupportedOp& e) {
    throw UnsupportedOp(origin + ": " + e.what());
  } catch (const ModelError& e) {
    throw ModelError(origin + ": " + e.what());
  } catch (const std::bad_alloc&) {
    throw ModelError(origin + ": out of memory while importing");
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw ModelError(origin + ": " + e.what());
  }
}

ir::Graph import_parsed(onnx::ModelProto& model, bool parsed, const std::string& base_dir,
                        const std::string& origin, const ImportOptions& options) {
  if (!parsed) throw ModelError(origin + ": not a valid ONNX model (protobuf parse failed)");
  return with_origin(origin, [&] { return import_proto(model, base_dir, options); });
}

}  // namespace

ir::Graph import_model(const std::string& path, const ImportOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw ModelError(path + ": cannot read file (no such file)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelError(path + ": cannot open file");
  // Parsing from the stream avoids holding the file's bytes and the parsed
  // model at the same time (weights can be gigabytes).
  onnx::ModelProto model;
  bool parsed = model.ParseFromIstream(&in);
  std::string base = std::filesystem::path(path).parent_path().string();
  return import_parsed(model, parsed, base.empty() ? "." : base, path, options);
}

ir::Graph import_model_bytes(const std::string& bytes, const std::string& base_dir,
                             const ImportOptions& options) {
  onnx::ModelProto model;
  bool parsed = model.ParseFromString(bytes);
  return import_parsed(model, parsed, base_dir.empty() ? "." : base_dir, "model", options);
}

ir::Graph import_model_proto(onnx::ModelProto& model, const std::string& origin,
                             const ImportOptions& options) {
  return import_parsed(model, true, ".", origin, options);
}

}  // namespace pipetrain::importer
