// Post-processors: the special tokens that frame one sequence
// (TemplateProcessing, BertProcessing, RobertaProcessing; ByteLevel adds none).
#include "data/hf/components.h"
#include "ir/error.h"

namespace pipetrain::data::hf {

PostProcessor make_post_processor(const Json& j) {
  const std::string type = component_type(j, "post_processor");
  if (type == "ByteLevel") return [](std::vector<int64_t> ids) { return ids; };
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    const int64_t cls = j.at("cls").at(1).get<int64_t>(), sep = j.at("sep").at(1).get<int64_t>();
    return [cls, sep](std::vector<int64_t> ids) {
      ids.insert(ids.begin(), cls);
      ids.push_back(sep);
      return ids;
    };
  }
  if (type == "TemplateProcessing") {
    // The single-sequence template as a list of id runs; an empty run stands for the text.
    std::vector<std::optional<std::vector<int64_t>>> parts;
    for (const auto& piece : j.at("single")) {
      if (piece.contains("Sequence")) {
        parts.emplace_back(std::nullopt);
      } else {
        const std::string name = piece.at("SpecialToken").at("id").get<std::string>();
        const auto& specials = j.at("special_tokens");
        if (!specials.contains(name))
          throw ModelError("TemplateProcessing names the special token '" + name +
                           "' that its special_tokens lacks");
        parts.emplace_back(specials[name].at("ids").get<std::vector<int64_t>>());
      }
    }
    return [parts](std::vector<int64_t> ids) {
      std::vector<int64_t> out;
      for (const auto& p : parts) {
        const auto& run = p ? *p : ids;
        out.insert(out.end(), run.begin(), run.end());
      }
      return out;
    };
  }
  if (type == "Sequence") {
    std::vector<PostProcessor> parts;
    for (const auto& p : j.at("processors")) parts.push_back(make_post_processor(p));
    return [parts](std::vector<int64_t> ids) {
      for (const auto& p : parts) ids = p(std::move(ids));
      return ids;
    };
  }
  unsupported("post_processor", type,
              "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence");
}

}  // namespace pipetrain::data::hf
