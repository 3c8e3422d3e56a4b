#include "data/text_rows.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "data/csv.h"
#include "data/tokenizer.h"
#include "ir/error.h"

namespace pipetrain::data {

namespace {

struct Row {
  std::string text, label;
  int64_t line = 0;  // where the row starts in the file (1-based), for messages
  std::string pair;  // the second text of a sentence pair (--text-pair-column)
};

// RFC 4180: comma-separated, fields in double quotes may hold commas, line
// breaks and "" for a quote; CRLF or LF ends a record.
std::vector<std::pair<std::vector<std::string>, int64_t>> parse_csv(const std::string& text,
                                                                    const std::string& what) {
  std::vector<std::pair<std::vector<std::string>, int64_t>> records;
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false, any = false;
  int64_t line = 1, record_line = 1;
  auto end_record = [&] {
    if (any || !field.empty() || !fields.empty()) {
      fields.push_back(std::move(field));
      records.emplace_back(std::move(fields), record_line);
    }
    fields.clear();
    field.clear();
    any = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      fields.push_back(std::move(field));
      field.clear();
      any = true;
    } else if (c == '\n' || (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n')) {
      if (c == '\r') ++i;
      end_record();
      record_line = ++line;
    } else {
      field += c;
      any = true;
    }
  }
  if (quoted)
    throw ModelError(what + ": a quoted field opened on line " + std::to_string(record_line) +
                     " is never closed");
  end_record();
  return records;
}

size_t column_index(const std::vector<std::string>& header, const std::string& name,
                    const char* role, const std::string& what) {
  const auto it = std::find(header.begin(), header.end(), name);
  if (it != header.end()) return static_cast<size_t>(it - header.begin());
  std::string known;
  for (const auto& h : header) known += (known.empty() ? "" : ", ") + h;
  throw ModelError(what + ": no " + role + " column '" + name + "' (the header has: " + known +
                   "; choose with --" + role + "-column)");
}

std::vector<Row> read_csv_rows(const std::string& path, const std::string& text_column,
                               const std::string& pair_column, const std::string& label_column) {
  const auto records = parse_csv(read_utf8_file(path), path);
  if (records.size() < 2) throw ModelError(path + ": no rows below the header");
  const auto& header = records[0].first;
  const size_t t = column_index(header, text_column, "text", path);
  const size_t l = label_column.empty() ? t : column_index(header, label_column, "label", path);
  const size_t p = pair_column.empty() ? t : column_index(header, pair_column, "text-pair", path);
  std::vector<Row> rows;
  for (size_t r = 1; r < records.size(); ++r) {
    const auto& [fields, line] = records[r];
    if (fields.size() != header.size())
      throw ModelError(path + ": the row on line " + std::to_string(line) + " has " +
                       std::to_string(fields.size()) + " fields, the header " +
                       std::to_string(header.size()));
    rows.push_back({fields[t], fields[l], line, pair_column.empty() ? "" : fields[p]});
  }
  return rows;
}

std::vector<Row> read_jsonl_rows(const std::string& path, const std::string& text_key,
                                 const std::string& pair_key, const std::string& label_key) {
  const std::string text = read_utf8_file(path);
  std::vector<Row> rows;
  int64_t line = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string s = text.substr(at, end - at);
    at = end + 1;
    ++line;
    if (s.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ": line " + std::to_string(line);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(s);
    } catch (const nlohmann::json::exception& e) {
      throw ModelError(where + " is not JSON (" + e.what() + ")");
    }
    if (!j.is_object()) throw ModelError(where + " is not a JSON object");
    if (!j.contains(text_key) || !j[text_key].is_string())
      throw ModelError(where + " has no text string '" + text_key +
                       "' (choose the key with --text-column)");
    std::string pair;
    if (!pair_key.empty()) {
      if (!j.contains(pair_key) || !j[pair_key].is_string())
        throw ModelError(where + " has no text string '" + pair_key +
                         "' (choose the key with --text-pair-column)");
      pair = j[pair_key].get<std::string>();
    }
    if (label_key.empty()) {  // a language model's text alone
      rows.push_back({j[text_key].get<std::string>(), "", line, ""});
      continue;
    }
    if (!j.contains(label_key))
      throw ModelError(where + " has no label '" + label_key +
                       "' (choose the key with --label-column)");
    const auto& label = j[label_key];
    if (!label.is_string() && !label.is_number_integer())
      throw ModelError(where + ": the label '" + label_key + "' is " + label.type_name() +
                       ", not a class name or an integer");
    rows.push_back(
        {j[text_key].get<std::string>(),
         label.is_string() ? label.get<std::string>() : std::to_string(label.get<int64_t>()), line,
         std::move(pair)});
  }
  if (rows.empty()) throw ModelError(path + ": no JSON lines");
  return rows;
}

// Longest first, as the `tokenizers` library and transformers truncate a pair: a
// token at a time off the end of the longer text (of the second when they are even).
void truncate_pair(std::vector<int64_t>& a, std::vector<int64_t>& b, size_t room) {
  while (a.size() + b.size() > room) (a.size() > b.size() ? a : b).pop_back();
}

// A language model's rows: each framed text's first T tokens, and as labels the
// token after each (ignore_index past the text's end and on the padding).
Dataset causal_lm_rows(const std::string& source, const std::vector<std::vector<int64_t>>& texts,
                       const Tokenizer& tokenizer, const DataOptions& options, size_t longest) {
  const auto n = static_cast<int64_t>(texts.size());
  const int64_t t = options.seq_len > 0 ? options.seq_len : static_cast<int64_t>(longest) - 1;
  if (t < 1) throw ModelError(source + ": no text has two tokens to learn from");
  Dataset ds;
  ds.name = source;
  ds.features = ir::Tensor(ir::DType::kI64, {n, t});
  ds.labels = ir::Tensor(ir::DType::kI64, {n, t});
  ir::Tensor mask(ir::DType::kI64, {n, t}), types(ir::DType::kI64, {n, t});
  std::fill_n(types.data<int64_t>(), n * t, 0);
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int64_t> seq = tokenizer.frame(texts[static_cast<size_t>(i)]);
    const auto len = static_cast<int64_t>(seq.size());
    int64_t* x = ds.features.data<int64_t>() + i * t;
    int64_t* y = ds.labels.data<int64_t>() + i * t;
    int64_t* m = mask.data<int64_t>() + i * t;
    for (int64_t k = 0; k < t; ++k) {
      x[k] = k < len ? seq[static_cast<size_t>(k)] : tokenizer.pad_id();
      y[k] = k + 1 < len ? seq[static_cast<size_t>(k + 1)] : options.ignore_index;
      m[k] = k < len ? 1 : 0;
    }
  }
  for (const auto& name : options.text_inputs) {
    if (name == "attention_mask") ds.inputs[name] = mask;
    if (name == "token_type_ids") ds.inputs[name] = types;
  }
  ds.num_classes = tokenizer.vocab_size();
  return ds;
}

}  // namespace

bool is_text_rows(const std::string& source) {
  return source.rfind("csv:", 0) == 0 || source.rfind("jsonl:", 0) == 0;
}

Dataset read_text_rows(const std::string& source, const DataOptions& options) {
  const bool csv = source.rfind("csv:", 0) == 0;
  const std::string path = source.substr(csv ? 4 : 6);
  const std::string text_column = options.text_column.empty() ? "text" : options.text_column;
  const std::string label_column = options.causal_lm              ? ""
                                   : options.label_column.empty() ? "label"
                                                                  : options.label_column;
  const std::string& pair_column = options.text_pair_column;
  const bool pairs = !pair_column.empty();
  if (pairs && options.causal_lm)
    throw ModelError(path +
                     ": --text-pair-column makes sentence pairs for classification; a "
                     "causal language model reads one text per row");
  const std::vector<Row> rows = csv ? read_csv_rows(path, text_column, pair_column, label_column)
                                    : read_jsonl_rows(path, text_column, pair_column, label_column);
  const auto tokenizer = make_tokenizer(options.tokenizer);
  // The special tokens around a text, or a pair's.
  const size_t framing =
      pairs ? tokenizer->frame_pair({}, {}).ids.size() : tokenizer->frame({}).size();

  std::vector<std::vector<int64_t>> ids, second;
  size_t longest = 0;
  for (const auto& r : rows) {
    ids.push_back(tokenizer->encode(r.text));
    if (pairs) second.push_back(tokenizer->encode(r.pair));
    longest = std::max(longest, ids.back().size() + (pairs ? second.back().size() : 0) + framing);
  }
  if (options.causal_lm) return causal_lm_rows(source, ids, *tokenizer, options, longest);
  const auto seq =
      static_cast<size_t>(options.seq_len > 0 ? options.seq_len : static_cast<int64_t>(longest));
  if (seq <= framing)
    throw ModelError(path + ": a sequence length of " + std::to_string(seq) +
                     " leaves no room for text after the tokenizer's " + std::to_string(framing) +
                     " special tokens");

  const auto n = static_cast<int64_t>(rows.size());
  const auto t = static_cast<int64_t>(seq);
  Dataset ds;
  ds.name = source;
  ds.features = ir::Tensor(ir::DType::kI64, {n, t});
  ir::Tensor mask(ir::DType::kI64, {n, t}), types(ir::DType::kI64, {n, t});
  std::fill_n(types.data<int64_t>(), n * t, 0);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t>& text_ids = ids[static_cast<size_t>(i)];
    FramedPair framed;
    if (pairs) {
      std::vector<int64_t>& pair_ids = second[static_cast<size_t>(i)];
      truncate_pair(text_ids, pair_ids, seq - framing);
      framed = tokenizer->frame_pair(std::move(text_ids), std::move(pair_ids));
    } else {
      if (text_ids.size() + framing > seq) text_ids.resize(seq - framing);  // truncated
      framed.ids = tokenizer->frame(std::move(text_ids));
      framed.type_ids.assign(framed.ids.size(), 0);
    }
    int64_t* row = ds.features.data<int64_t>() + i * t;
    int64_t* m = mask.data<int64_t>() + i * t;
    int64_t* type = types.data<int64_t>() + i * t;
    for (int64_t k = 0; k < t; ++k) {
      const bool real = k < static_cast<int64_t>(framed.ids.size());
      row[k] = real ? framed.ids[static_cast<size_t>(k)] : tokenizer->pad_id();
      m[k] = real ? 1 : 0;
      type[k] = real ? framed.type_ids[static_cast<size_t>(k)] : 0;
    }
  }
  for (const auto& name : options.text_inputs) {
    if (name == "attention_mask") ds.inputs[name] = mask;
    if (name == "token_type_ids") ds.inputs[name] = types;
  }
  std::vector<std::string> labels;
  for (const auto& r : rows) labels.push_back(r.label);
  labels_from_strings(labels, "classification", path, ds);
  return ds;
}

}  // namespace pipetrain::data
