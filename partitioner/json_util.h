// Reading JSON fields with PlanError messages that name the field and where
// it sits, instead of nlohmann's generic type errors.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "ir/error.h"

namespace pipetrain::partitioner::json_util {

inline const nlohmann::json& field(const nlohmann::json& j, const char* key,
                                   const std::string& where) {
  if (!j.is_object()) throw PlanError(where + ": expected a JSON object");
  auto it = j.find(key);
  if (it == j.end()) throw PlanError(where + ": missing field '" + key + "'");
  return *it;
}

inline double number(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto& v = field(j, key, where);
  if (!v.is_number()) throw PlanError(where + ": field '" + key + "' must be a number");
  double d = v.get<double>();
  if (!std::isfinite(d)) throw PlanError(where + ": field '" + key + "' is not finite");
  return d;
}

inline double number_or(const nlohmann::json& j, const char* key, double dflt,
                        const std::string& where) {
  return j.is_object() && j.contains(key) ? number(j, key, where) : dflt;
}

inline int64_t integer(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto& v = field(j, key, where);
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX})
    throw PlanError(where + ": field '" + key + "' is out of range");
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number()) {  // 3.0 is 3; the range check keeps the cast defined
    const double d = v.get<double>();
    if (d == std::floor(d) && std::fabs(d) < 0x1p63) return static_cast<int64_t>(d);
  }
  throw PlanError(where + ": field '" + key + "' must be an integer in int64's range");
}

/// A count or an index (layers, workers, replication): an integer that fits
/// an int, so that a huge value is refused rather than wrapped.
inline int small_integer(const nlohmann::json& j, const char* key, const std::string& where) {
  const int64_t v = integer(j, key, where);
  if (v < INT32_MIN || v > INT32_MAX) throw PlanError(where + ": field '" + key + "' is out of range");
  return static_cast<int>(v);
}

/// An array element that must be an int (a layer or worker index).
inline int small_integer(const nlohmann::json& v, const std::string& what) {
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT32_MAX) ||
      v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX)
    throw PlanError(what + " must be integers in int's range");
  return static_cast<int>(v.get<int64_t>());
}

inline std::string string(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto& v = field(j, key, where);
  if (!v.is_string()) throw PlanError(where + ": field '" + key + "' must be a string");
  return v.get<std::string>();
}

inline std::string string_or(const nlohmann::json& j, const char* key, const std::string& dflt,
                             const std::string& where) {
  return j.is_object() && j.contains(key) ? string(j, key, where) : dflt;
}

inline bool boolean_or(const nlohmann::json& j, const char* key, bool dflt,
                       const std::string& where) {
  if (!j.is_object() || !j.contains(key)) return dflt;
  const auto& v = j.at(key);
  if (!v.is_boolean()) throw PlanError(where + ": field '" + key + "' must be true or false");
  return v.get<bool>();
}

inline const nlohmann::json& array(const nlohmann::json& j, const char* key,
                                   const std::string& where) {
  const auto& v = field(j, key, where);
  if (!v.is_array()) throw PlanError(where + ": field '" + key + "' must be an array");
  return v;
}

/// Parses text; a syntax error (or a number out of double's range, which
/// nlohmann reports as out_of_range) becomes PlanError naming `what`.
inline nlohmann::json parse(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw PlanError(what + ": not valid JSON (" + e.what() + ")");
  }
}

}  // namespace pipetrain::partitioner::json_util
