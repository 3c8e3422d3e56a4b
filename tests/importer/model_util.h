// Helpers for importer tests: models written in ONNX's text syntax
// (onnx::OnnxParser), imported from memory, and scratch directories.
#pragma once

#include <onnx/defs/parser.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "importer/importer.h"
#include "ir/error.h"

namespace pipetrain::test {

/// Parses a model in ONNX text syntax; throws on a syntax error (a test bug).
inline onnx::ModelProto parse_model(const std::string& text) {
  onnx::ModelProto m;
  auto status = onnx::OnnxParser::Parse(m, text.c_str());
  if (!status.IsOK()) throw std::runtime_error("bad test model: " + status.ErrorMessage());
  return m;
}

/// Names the nodes in order ("" leaves a node unnamed).
inline void name_nodes(onnx::ModelProto& m, const std::vector<std::string>& names) {
  for (size_t i = 0; i < names.size() && i < static_cast<size_t>(m.graph().node_size()); ++i)
    m.mutable_graph()->mutable_node(static_cast<int>(i))->set_name(names[i]);
}

inline std::string serialize(const onnx::ModelProto& m) {
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

inline ir::Graph import_proto(const onnx::ModelProto& m,
                              const importer::ImportOptions& options = {}) {
  return importer::import_model_bytes(serialize(m), ".", options);
}

inline ir::Graph import_text(const std::string& text, const importer::ImportOptions& options = {}) {
  return import_proto(parse_model(text), options);
}

/// A float32 tensor of reproducible values in [-0.5, 0.5) (an LCG from `seed`).
inline ir::Tensor filled(ir::Shape shape, uint32_t seed) {
  ir::Tensor t(ir::DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    t.data<float>()[i] = static_cast<float>(seed >> 8) / static_cast<float>(1u << 24) - 0.5f;
  }
  return t;
}

/// The message of the exception `f` throws as E, or "" if it throws nothing.
template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

/// A fresh directory under the system temp dir, removed on destruction.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("pipetrain_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace pipetrain::test
