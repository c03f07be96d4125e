// Reading the JSON of signatures (Sigstore bundles, trust roots, transparency
// log entries) as untrusted input: every member is looked up with its type
// checked, and a missing or mistyped one is an Error(SignatureInvalid) naming
// where it was looked for. The documents are parsed with parse_bounded_json
// first; these helpers never recurse.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/base64.h"
#include "base/error.h"

namespace tsarchive::signed_json {

using nlohmann::json;

// The value at `key` of an object, or a SignatureInvalid naming where.
inline const json& member(const json& object, const char* key, const std::string& where) {
  if (!object.is_object()) throw_signature_invalid(where + " is not a JSON object");
  const auto it = object.find(key);
  if (it == object.end()) throw_signature_invalid(where + " has no \"" + key + "\"");
  return *it;
}

// Refuses a member of `object` outside `known`, the members the Sigstore
// bundle's protobuf schema gives that object, as sigstore-models (model_signing's
// reader) refuses them: nothing signs them, and they let a signature file
// double as another file (a loader's config.json).
inline void only_members(const json& object, std::initializer_list<const char*> known, const std::string& where) {
  if (!object.is_object()) throw_signature_invalid(where + " is not a JSON object");
  for (auto it = object.begin(); it != object.end(); ++it) {
    const std::string& key = it.key();
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; })) {
      throw_signature_invalid(where + " has the member \"" + key.substr(0, 80) +
                              "\", which the Sigstore bundle format does not have");
    }
  }
}

// The member, or nullptr when it is absent or null.
inline const json* optional_member(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

inline std::string string_member(const json& object, const char* key, const std::string& where) {
  const json& value = member(object, key, where);
  if (!value.is_string()) throw_signature_invalid(where + "'s \"" + key + "\" is not a string");
  return value.get<std::string>();
}

inline std::string base64_member(const json& object, const char* key, const std::string& where) {
  std::string problem;
  auto bytes = base64_decode(string_member(object, key, where), &problem);
  if (!bytes) throw_signature_invalid(where + "'s \"" + key + "\" is not base64: " + problem);
  return std::move(*bytes);
}

// A list member (an empty list when `required` is false and it is absent).
inline const json& array_member(const json& object, const char* key, const std::string& where, bool required = true) {
  static const json kEmpty = json::array();
  const json* value = required ? &member(object, key, where) : optional_member(object, key);
  if (value == nullptr) return kEmpty;
  if (!value->is_array()) throw_signature_invalid(where + "'s \"" + key + "\" is not a list");
  return *value;
}

// A non-negative integer written as protobuf JSON writes int64: a string of
// digits ("1718048845"), or a plain number.
inline int64_t int64_member(const json& object, const char* key, const std::string& where) {
  const json& value = member(object, key, where);
  if (value.is_number_unsigned()) {
    if (value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) throw_signature_invalid(where + "'s \"" + key + "\" is too large");
    return static_cast<int64_t>(value.get<uint64_t>());
  }
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    int64_t out = 0;
    const bool digits = !text.empty() && text.size() <= 18 &&
                        text.find_first_not_of("0123456789") == std::string::npos;
    if (digits) {
      for (const char c : text) out = out * 10 + (c - '0');
      return out;
    }
  }
  throw_signature_invalid(where + "'s \"" + key + "\" is not a non-negative integer");
}

inline std::string to_hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

// Lowercase hex to bytes; the caller has checked the text is hex of even length.
inline std::string hex_to_bytes(std::string_view hex) {
  std::string out(hex.size() / 2, '\0');
  auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  return out;
}

}  // namespace tsarchive::signed_json
