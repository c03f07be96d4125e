// The one way to parse JSON that came from an archive or a user: extra file
// previews, extra/producer_info.json (the stamp), extra/tsarchive/check.json
// (run's self-check), `inspect --extra`, `extra set` of a .json name, json:
// arguments.
//
// nlohmann's parser keeps its own stack, but dumping, comparing and
// converting a parsed value recurse once per level: 100,000 nested '[' crash
// the process, and pretty printing indents by the depth (depth 10,000 gives
// 200 MB of output). So the depth and the size are measured on the bytes,
// before nlohmann sees them, and anything over the limits is refused as data
// ("JSON nested deeper than 512 levels"), never parsed. So is the number of
// values: a parsed value costs about 100 bytes however short its text, and 3
// bytes of `{},` are one (a 64 MiB record of them would take 2.4 GB).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tsarchive {

// Documented limits (man page, "JSON FROM ARCHIVES").
struct JsonLimits {
  static constexpr size_t kDepth = 512;                // nesting of [ and {
  static constexpr uint64_t kBytes = 16ull << 20;      // input size
  static constexpr uint64_t kPrettyBytes = 16ull << 20;  // pretty-printed output (indent 2)
  static constexpr uint64_t kValues = 1ull << 20;      // values and keys (about 100 MB parsed)
};

// What parse_bounded_json says of text that is within the limits but not JSON.
inline constexpr std::string_view kNotValidJson = "not valid JSON";

struct JsonShape {
  size_t depth = 0;           // deepest nesting of [ and { outside strings
  uint64_t pretty_bytes = 0;  // about what dump(2) would write (an upper estimate)
  uint64_t values = 0;        // values and keys, at most (brackets, commas and colons, plus one)
};

// Measures `text` in one pass without parsing it (it need not be valid JSON).
// Stops early once the depth passes `stop_depth`.
JsonShape measure_json(std::string_view text, size_t stop_depth = SIZE_MAX);

// Why `text` is over the limits ("JSON nested deeper than 512 levels", "JSON
// larger than 16 MiB (N bytes)", "JSON of more than N values"), or nothing
// when nlohmann may parse it.
std::optional<std::string> json_limit_problem(std::string_view text, size_t max_depth = JsonLimits::kDepth,
                                              uint64_t max_bytes = JsonLimits::kBytes,
                                              uint64_t max_values = JsonLimits::kValues);

// `text` parsed, when it is within the limits and valid JSON; otherwise
// nothing, and *problem (when given) says why: the limit, or "not valid JSON".
// Never throws for content.
template <class Json = nlohmann::json>
std::optional<Json> parse_bounded_json(std::string_view text, std::string* problem = nullptr,
                                       size_t max_depth = JsonLimits::kDepth, uint64_t max_bytes = JsonLimits::kBytes,
                                       uint64_t max_values = JsonLimits::kValues) {
  if (auto why = json_limit_problem(text, max_depth, max_bytes, max_values)) {
    if (problem != nullptr) *problem = *why;
    return std::nullopt;
  }
  // A NUL byte is never JSON, and nlohmann's lexer takes it for the end of
  // the input: bytes after it would go unread, and a file with them pass.
  if (text.find('\0') != std::string_view::npos) {
    if (problem != nullptr) *problem = std::string(kNotValidJson);
    return std::nullopt;
  }
  Json doc = Json::parse(text.begin(), text.end(), nullptr, false);
  if (doc.is_discarded()) {
    if (problem != nullptr) *problem = std::string(kNotValidJson);
    return std::nullopt;
  }
  return doc;
}

// `text` as strict JSON that reads as Python's json.loads reads it, for
// records that PyTorch writes and reads with Python's json (a .pt2 program):
// json.dumps writes a float constant nan or inf as NaN or Infinity, and
// json.loads accepts them, a lone surrogate escape (\ud800) and integers of
// any length, which strict JSON (and nlohmann) refuse. Outside strings, NaN
// becomes null, +-Infinity and a float beyond a double the largest double,
// an integer beyond int64 int64's bound; in strings, a lone surrogate escape
// becomes \ufffd (a character no name or expression allows, as the lone
// surrogate is one). Everything else is copied, so what is not JSON for
// Python stays not JSON.
std::string python_json_as_strict(std::string_view text);

// `text` parsed as parse_bounded_json parses it, but with its top-level
// member `member` apart: `rest` is the document without it, and `member` its
// value parsed keeping every object's keys in the text's order (as Python's
// json.loads and TorchScript's dicts do), or nothing when the text has no
// such member. A key given twice keeps its first place and its last value,
// as a Python dict does, in time linear in the text: nlohmann's ordered_json
// parser would look every key up among its siblings (quadratic: a request of
// a million keys would take hours). One pass, and each value is made once, in
// one form or the other: a request's "parameters" (serve) costs one parse,
// as its budget counts it, not two. Nothing when `text` is over the limits or
// not JSON (*problem says why).
struct JsonApart {
  nlohmann::json rest;
  std::optional<nlohmann::ordered_json> member;
};
std::optional<JsonApart> parse_bounded_json_apart(std::string_view text, std::string_view member,
                                                  std::string* problem = nullptr,
                                                  size_t max_depth = JsonLimits::kDepth,
                                                  uint64_t max_bytes = JsonLimits::kBytes,
                                                  uint64_t max_values = JsonLimits::kValues);

// `text` parsed, as parse_bounded_json, when it also stays within
// JsonLimits::kPrettyBytes pretty-printed (what shows it indented: `inspect
// --extra NAME`, with or without --json); otherwise nothing, and *problem
// says why.
std::optional<nlohmann::json> parse_json_for_display(std::string_view text, std::string* problem = nullptr);

// CBOR (RFC 8949) as nlohmann's to_cbor writes it, measured before
// from_cbor sees it (a worker's reply: worker/worker_codec.h). from_cbor
// recurses once per level (100,000 nested arrays overflow the stack) and
// allocates 16 to 96 bytes for each one-byte item (an empty map is 80 bytes
// decoded). Definite lengths only (to_cbor writes no other), no tags; every
// declared item and byte string must be in `bytes`.
struct CborShape {
  bool well_formed = false;  // false also when `max_depth` or `max_decoded_bytes` was passed
  size_t depth = 0;          // deepest nesting of arrays and maps seen
  uint64_t values = 0;       // items seen (map keys count)
  // What from_cbor allocates for them (nlohmann 3.11, glibc's malloc: its
  // 16-byte headers and 32-byte smallest block), beyond the text and bytes
  // of strings and byte strings, which the reply itself already holds.
  uint64_t decoded_bytes = 0;
};
CborShape measure_cbor(std::string_view bytes, size_t max_depth, uint64_t max_decoded_bytes);

// parse_json_for_display(text) pretty-printed (indent 2, UTF-8 kept).
std::optional<std::string> pretty_json(std::string_view text, std::string* problem = nullptr);

}  // namespace tsarchive
