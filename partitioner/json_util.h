// Reading JSON fields with PlanError messages that name the field and where
// it sits, instead of nlohmann's generic type errors.
#pragma once

#include <cmath>
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
  if (!v.is_number_integer() && !(v.is_number() && v.get<double>() == std::floor(v.get<double>())))
    throw PlanError(where + ": field '" + key + "' must be an integer");
  return v.get<int64_t>();
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

inline const nlohmann::json& array(const nlohmann::json& j, const char* key,
                                   const std::string& where) {
  const auto& v = field(j, key, where);
  if (!v.is_array()) throw PlanError(where + ": field '" + key + "' must be an array");
  return v;
}

/// Parses text; a syntax error becomes PlanError naming `what` (a file name).
inline nlohmann::json parse(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw PlanError(what + ": not valid JSON (" + e.what() + ")");
  }
}

}  // namespace pipetrain::partitioner::json_util
