// Post-processors: the special tokens that frame one sequence or a pair, and a
// pair's token types (TemplateProcessing, BertProcessing, RobertaProcessing;
// ByteLevel adds none), as the `tokenizers` library's encode(a) and encode(a, b).
#include <algorithm>

#include "data/hf/components.h"
#include "ir/error.h"

namespace pipetrain::data::hf {

namespace {

std::vector<int64_t> cat(std::initializer_list<const std::vector<int64_t>*> parts) {
  std::vector<int64_t> out;
  for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
  return out;
}

// A template ("single" or "pair"): runs of special-token ids and the sequences,
// each with its type id.
struct Piece {
  int sequence = -1;  // 0 for $A, 1 for $B; -1 for special tokens
  std::vector<int64_t> ids;
  int64_t type_id = 0;
};

std::vector<Piece> parse_template(const Json& pieces, const Json& specials) {
  std::vector<Piece> out;
  for (const auto& piece : pieces) {
    Piece p;
    if (piece.contains("Sequence")) {
      const auto& s = piece.at("Sequence");
      const std::string id = s.at("id").get<std::string>();
      if (id != "A" && id != "B")
        throw ModelError("TemplateProcessing names the sequence '" + id + "' (A or B)");
      p.sequence = id == "A" ? 0 : 1;
      p.type_id = value_or<int64_t>(s, "type_id", 0);
    } else {
      const auto& s = piece.at("SpecialToken");
      const std::string name = s.at("id").get<std::string>();
      if (!specials.contains(name))
        throw ModelError("TemplateProcessing names the special token '" + name +
                         "' that its special_tokens lacks");
      p.ids = specials[name].at("ids").get<std::vector<int64_t>>();
      p.type_id = value_or<int64_t>(s, "type_id", 0);
    }
    out.push_back(std::move(p));
  }
  return out;
}

FramedPair apply_template(const std::vector<Piece>& pieces, const std::vector<int64_t>& a,
                          const std::vector<int64_t>& b) {
  FramedPair out;
  for (const auto& p : pieces) {
    const auto& run = p.sequence < 0 ? p.ids : p.sequence == 0 ? a : b;
    out.ids.insert(out.ids.end(), run.begin(), run.end());
    out.type_ids.resize(out.ids.size(), p.type_id);
  }
  return out;
}

}  // namespace

PostProcessor make_post_processor(const Json& j) {
  const std::string type = component_type(j, "post_processor");
  if (type == "ByteLevel")
    return {[](std::vector<int64_t> ids) { return ids; },
            [](std::vector<int64_t> a, std::vector<int64_t> b) { return concat_pair(a, b); },
            false};
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    const std::vector<int64_t> cls{j.at("cls").at(1).get<int64_t>()},
        sep{j.at("sep").at(1).get<int64_t>()};
    const bool roberta = type == "RobertaProcessing";
    return {[cls, sep](std::vector<int64_t> ids) {
              return cat({&cls, &ids, &sep});
            },
            [cls, sep, roberta](std::vector<int64_t> a, std::vector<int64_t> b) {
              // BERT: [CLS] a [SEP] b [SEP], b's part type 1; RoBERTa: <s> a </s></s> b </s>,
              // all type 0.
              FramedPair out;
              out.ids =
                  roberta ? cat({&cls, &a, &sep, &sep, &b, &sep}) : cat({&cls, &a, &sep, &b, &sep});
              out.type_ids.assign(out.ids.size(), 0);
              if (!roberta)
                std::fill(out.type_ids.begin() + static_cast<int64_t>(a.size() + 2),
                          out.type_ids.end(), 1);
              return out;
            }};
  }
  if (type == "TemplateProcessing") {
    const auto& specials = j.at("special_tokens");
    const std::vector<Piece> single = parse_template(j.at("single"), specials);
    // Without a pair template (or with an empty one) the library joins the two as
    // "$A:0 $B:1"; one that leaves a text out would drop it.
    const bool has_pair = j.contains("pair") && !j["pair"].is_null() && !j["pair"].empty();
    const std::vector<Piece> pair =
        has_pair ? parse_template(j["pair"], specials) : std::vector<Piece>{{0, {}, 0}, {1, {}, 1}};
    for (int seq : {0, 1})
      if (std::none_of(pair.begin(), pair.end(), [&](const Piece& p) { return p.sequence == seq; }))
        throw ModelError(std::string("TemplateProcessing's pair template leaves out $") +
                         (seq == 0 ? "A" : "B"));
    return {[single](std::vector<int64_t> ids) { return apply_template(single, ids, {}).ids; },
            [pair](std::vector<int64_t> a, std::vector<int64_t> b) {
              return apply_template(pair, a, b);
            }};
  }
  if (type == "Sequence") {
    std::vector<PostProcessor> parts;
    for (const auto& p : j.at("processors")) parts.push_back(make_post_processor(p));
    // A pair is framed by the one processor that adds tokens (ByteLevel only trims
    // offsets); two that frame would frame the framed pair again, which is not read here.
    std::vector<PostProcessor> framing;
    for (const auto& p : parts)
      if (p.frames) framing.push_back(p);
    PostProcessor out;
    out.single = [parts](std::vector<int64_t> ids) {
      for (const auto& p : parts) ids = p.single(std::move(ids));
      return ids;
    };
    out.frames = !framing.empty();
    if (framing.size() > 1)
      out.pair = [](std::vector<int64_t>, std::vector<int64_t>) -> FramedPair {
        throw ModelError(
            "a Sequence post_processor with two processors that add special tokens frames no "
            "sequence pairs here");
      };
    else if (framing.size() == 1)
      out.pair = framing[0].pair;
    else
      out.pair = [](std::vector<int64_t> a, std::vector<int64_t> b) { return concat_pair(a, b); };
    return out;
  }
  unsupported("post_processor", type,
              "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence");
}

}  // namespace pipetrain::data::hf
