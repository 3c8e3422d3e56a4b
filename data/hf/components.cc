#include "data/hf/components.h"

#include "data/hf/unicode.h"
#include "ir/error.h"

namespace pipetrain::data::hf {

std::unique_ptr<Model> make_bpe(const Json& j);
std::unique_ptr<Model> make_wordpiece(const Json& j);
std::unique_ptr<Model> make_wordlevel(const Json& j);
std::unique_ptr<Model> make_unigram(const Json& j);

std::string component_type(const Json& j, const char* what) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    throw ModelError(std::string("a ") + what + " without a \"type\"");
  return j["type"].get<std::string>();
}

void unsupported(const char* what, const std::string& type, const char* known) {
  throw ModelError(std::string("unsupported ") + what + " '" + type + "' (pipetrain reads " +
                   known + ")");
}

std::string pattern_source(const Json& pattern) {
  if (pattern.contains("Regex")) return pattern["Regex"].get<std::string>();
  if (pattern.contains("String")) return regex_escape(pattern["String"].get<std::string>());
  throw ModelError("a pattern that is neither {\"String\": ...} nor {\"Regex\": ...}");
}

std::unique_ptr<Model> make_model(const Json& j) {
  // Files written before "type" was serialized name the model by its fields.
  std::string type;
  if (j.contains("type")) {
    type = component_type(j, "model");
  } else if (j.contains("merges")) {
    type = "BPE";
  } else if (j.contains("max_input_chars_per_word")) {
    type = "WordPiece";
  } else if (j.contains("vocab") && j["vocab"].is_array()) {
    type = "Unigram";
  } else {
    type = "WordLevel";
  }
  if (type == "BPE") return make_bpe(j);
  if (type == "WordPiece") return make_wordpiece(j);
  if (type == "WordLevel") return make_wordlevel(j);
  if (type == "Unigram") return make_unigram(j);
  unsupported("model", type, "BPE, WordPiece, WordLevel, Unigram");
}

}  // namespace pipetrain::data::hf
