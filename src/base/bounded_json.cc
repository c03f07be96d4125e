#include "base/bounded_json.h"

namespace tsarchive {
namespace {

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

JsonShape measure_json(std::string_view text, size_t stop_depth) {
  JsonShape shape;
  size_t depth = 0;
  bool in_string = false;
  uint64_t pretty = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      ++pretty;
      if (c == '\\') {
        ++i;
        pretty += 5;  // an escape may come back as \u00XX
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"': in_string = true; ++pretty; break;
      case '[':
      case '{':
        ++depth;
        if (depth > shape.depth) shape.depth = depth;
        if (depth > stop_depth) {
          shape.pretty_bytes = pretty;
          return shape;
        }
        pretty += 2 + 2 * depth;  // the bracket, a newline, the indent of what follows
        break;
      case ']':
      case '}':
        pretty += 2 + 2 * depth;  // a newline, the indent, the bracket
        if (depth > 0) --depth;
        break;
      case ',': pretty += 2 + 2 * depth; break;
      case ':': pretty += 2; break;
      case ' ': case '\t': case '\n': case '\r': break;
      default: pretty += 4; break;  // numbers may come back longer: 1e9 -> 1000000000.0
    }
  }
  shape.pretty_bytes = pretty + 1;
  return shape;
}

std::optional<std::string> json_limit_problem(std::string_view text, size_t max_depth, uint64_t max_bytes) {
  if (text.size() > max_bytes) {
    return "JSON larger than " + mib(max_bytes) + " (" + std::to_string(text.size()) + " bytes)";
  }
  if (measure_json(text, max_depth).depth > max_depth) {
    return "JSON nested deeper than " + std::to_string(max_depth) + " levels";
  }
  return std::nullopt;
}

std::optional<nlohmann::json> parse_json_for_display(std::string_view text, std::string* problem) {
  const JsonShape shape = measure_json(text, JsonLimits::kDepth);
  if (shape.depth <= JsonLimits::kDepth && shape.pretty_bytes > JsonLimits::kPrettyBytes) {
    if (problem != nullptr) *problem = "pretty-printed, it would be more than " + mib(JsonLimits::kPrettyBytes);
    return std::nullopt;
  }
  return parse_bounded_json(text, problem);
}

std::optional<std::string> pretty_json(std::string_view text, std::string* problem) {
  const auto doc = parse_json_for_display(text, problem);
  if (!doc) return std::nullopt;
  return doc->dump(2);
}

}  // namespace tsarchive
