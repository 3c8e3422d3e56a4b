// PLACEHOLDER: replaced by the real importer.
#include "importer/importer.h"

#include "ir/error.h"

namespace pipetrain::importer {
ir::Graph import_model(const std::string& path, const ImportOptions&) {
  throw ModelError(path + ": importer not implemented yet");
}
ir::Graph import_model_bytes(const std::string&, const std::string&, const ImportOptions&) {
  throw ModelError("importer not implemented yet");
}
void export_model(const ir::Graph&, const std::string&) { throw Error("not implemented yet"); }
ir::Tensor load_tensor_proto(const std::string& path) {
  throw ModelError(path + ": not implemented yet");
}
}  // namespace pipetrain::importer
