#include "base/bounded_json.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <algorithm>
#include <cstddef>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tsarchive {
namespace {

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Builds the value of one top-level member in order (parse_bounded_json_apart).
// Objects are filled by appending to ordered_map's vector, with an index per
// open object for the keys seen, instead of ordered_map's linear lookups.
class OrderedMemberBuilder : public nlohmann::json_sax<nlohmann::ordered_json> {
 public:
  explicit OrderedMemberBuilder(std::string_view member) : member_(member) {}
  nlohmann::ordered_json result;

  bool null() override { return put(nullptr); }
  bool boolean(bool v) override { return put(v); }
  bool number_integer(number_integer_t v) override { return put(v); }
  bool number_unsigned(number_unsigned_t v) override { return put(v); }
  bool number_float(number_float_t v, const string_t&) override { return put(v); }
  bool string(string_t& v) override { return put(std::move(v)); }
  bool binary(binary_t& v) override { return put(nlohmann::ordered_json::binary(std::move(v))); }
  bool start_object(std::size_t) override { return open(nlohmann::ordered_json::object()); }
  bool start_array(std::size_t) override { return open(nlohmann::ordered_json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (depth_ == 1) {
      inside_ = k == member_;
      seen_ = seen_ || inside_;
    } else if (building()) {
      pending_key_ = std::move(k);
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
  // Whether the next value is the member's or part of it (ParserApart).
  bool within() const { return inside_; }
  // Whether the text has the member: its value may be null.
  bool seen() const { return seen_; }
  // Nesting, the top-level object's 1.
  size_t depth() const { return depth_; }

 private:
  struct Open {
    nlohmann::ordered_json value;
    std::unordered_map<std::string, size_t> index;  // an object's keys: where each is
    std::string key;                                // the key this value goes under in its parent
  };
  bool building() const { return inside_ && depth_ >= 2; }

  bool put(nlohmann::ordered_json v) {
    if (depth_ == 1 && inside_) {
      result = std::move(v);  // a scalar member
    } else if (building()) {
      add(std::move(v), std::move(pending_key_));
    }
    return true;
  }
  void add(nlohmann::ordered_json v, std::string key) {
    Open& parent = stack_.back();
    if (parent.value.is_array()) {
      parent.value.get_ref<nlohmann::ordered_json::array_t&>().push_back(std::move(v));
      return;
    }
    auto& members = parent.value.get_ref<nlohmann::ordered_json::object_t&>();
    const auto [at, fresh] = parent.index.emplace(key, members.size());
    if (fresh) {
      members.emplace_back(std::move(key), std::move(v));  // std::vector's, not a lookup
    } else {
      (members.begin() + static_cast<std::ptrdiff_t>(at->second))->second = std::move(v);  // last value, first place
    }
  }
  bool open(nlohmann::ordered_json empty) {
    ++depth_;
    if (depth_ >= 2 && inside_) stack_.push_back(Open{std::move(empty), {}, std::move(pending_key_)});
    return true;
  }
  bool close() {
    if (depth_ >= 2 && inside_) {
      Open done = std::move(stack_.back());
      stack_.pop_back();
      if (stack_.empty()) {
        result = std::move(done.value);
      } else {
        add(std::move(done.value), std::move(done.key));
      }
    }
    --depth_;
    if (depth_ == 1) inside_ = false;  // the member's value ended
    return true;
  }

  std::string_view member_;
  size_t depth_ = 0;      // 1: inside the top-level object
  bool inside_ = false;   // within the member's value
  bool seen_ = false;
  std::string pending_key_;
  std::vector<Open> stack_;
};

// Parses a document as nlohmann::json::parse does, except one top-level
// member, whose value an OrderedMemberBuilder builds in order instead: each
// value of the text is made once, in one form or the other
// (parse_bounded_json_apart). nlohmann's sax_parse calls it statically.
class ParserApart {
 public:
  using Json = nlohmann::json;
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  ParserApart(Json& doc, std::string_view member) : dom_(doc, false), member_(member) {}
  nlohmann::ordered_json& member() { return member_.result; }
  bool seen() const { return member_.seen(); }

  bool null() { return member_.within() ? member_.null() : dom_.null(); }
  bool boolean(bool v) { return member_.within() ? member_.boolean(v) : dom_.boolean(v); }
  bool number_integer(number_integer_t v) {
    return member_.within() ? member_.number_integer(v) : dom_.number_integer(v);
  }
  bool number_unsigned(number_unsigned_t v) {
    return member_.within() ? member_.number_unsigned(v) : dom_.number_unsigned(v);
  }
  bool number_float(number_float_t v, const string_t& text) {
    return member_.within() ? member_.number_float(v, text) : dom_.number_float(v, text);
  }
  bool string(string_t& v) { return member_.within() ? member_.string(v) : dom_.string(v); }
  bool binary(binary_t& v) { return member_.within() ? member_.binary(v) : dom_.binary(v); }
  // The builder sees every bracket and top-level key, to know where the
  // member is; the document, all but the member's.
  bool start_object(std::size_t n) {
    return member_.within() ? member_.start_object(n) : member_.start_object(n) && dom_.start_object(n);
  }
  bool start_array(std::size_t n) {
    return member_.within() ? member_.start_array(n) : member_.start_array(n) && dom_.start_array(n);
  }
  // An end at depth 1 is the top-level object's, though a scalar member
  // left the builder within().
  bool end_object() { return closes_member() ? member_.end_object() : member_.end_object() && dom_.end_object(); }
  bool end_array() { return closes_member() ? member_.end_array() : member_.end_array() && dom_.end_array(); }
  bool key(string_t& k) {
    if (member_.within() && member_.depth() >= 2) return member_.key(k);  // a key inside the member
    if (member_.depth() == 1) {
      member_.key(k);  // a top-level key: the member's, or the document's
      if (member_.within()) return true;
    }
    return dom_.key(k);
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

 private:
  bool closes_member() const { return member_.within() && member_.depth() >= 2; }

  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  OrderedMemberBuilder member_;
};

}  // namespace

std::optional<JsonApart> parse_bounded_json_apart(std::string_view text, std::string_view member, std::string* problem,
                                                  size_t max_depth, uint64_t max_bytes, uint64_t max_values) {
  if (auto why = json_limit_problem(text, max_depth, max_bytes, max_values)) {
    if (problem != nullptr) *problem = *why;
    return std::nullopt;
  }
  JsonApart parsed;
  ParserApart parser(parsed.rest, member);
  if (text.find('\0') != std::string_view::npos ||  // nlohmann would stop there (parse_bounded_json)
      !nlohmann::json::sax_parse(text.begin(), text.end(), &parser)) {
    if (problem != nullptr) *problem = std::string(kNotValidJson);
    return std::nullopt;
  }
  if (parser.seen()) parsed.member = std::move(parser.member());
  return parsed;
}

JsonShape measure_json(std::string_view text, size_t stop_depth) {
  JsonShape shape;
  shape.values = 1;
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
        ++shape.values;
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
      case ',': pretty += 2 + 2 * depth; ++shape.values; break;
      case ':': pretty += 2; ++shape.values; break;
      case ' ': case '\t': case '\n': case '\r': break;
      default: pretty += 4; break;  // numbers may come back longer: 1e9 -> 1000000000.0
    }
  }
  shape.pretty_bytes = pretty + 1;
  return shape;
}

std::string python_json_as_strict(std::string_view text) {
  static constexpr std::string_view kMaxDouble = "1.7976931348623157e308";
  const auto hex4 = [&](size_t at, unsigned* out) {
    if (at + 4 > text.size()) return false;
    unsigned v = 0;
    for (size_t i = at; i < at + 4; ++i) {
      const char c = text[i];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return false;
      v = v * 16 + unsigned(d);
    }
    *out = v;
    return true;
  };
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {
      out += c;
      ++i;
      while (i < text.size() && text[i] != '"') {
        if (text[i] != '\\' || i + 1 >= text.size()) {
          out += text[i++];
          continue;
        }
        unsigned unit = 0;
        if (text[i + 1] != 'u' || !hex4(i + 2, &unit) || unit < 0xd800 || unit > 0xdfff) {
          out.append(text.substr(i, 2));
          i += 2;
          continue;
        }
        unsigned low = 0;
        if (unit < 0xdc00 && text.compare(i + 6, 2, "\\u") == 0 && hex4(i + 8, &low) && low >= 0xdc00 && low <= 0xdfff) {
          out.append(text.substr(i, 12));  // a surrogate pair: one character
          i += 12;
        } else {
          out += "\\ufffd";
          i += 6;
        }
      }
      if (i < text.size()) out += text[i++];
    } else if (text.compare(i, 3, "NaN") == 0) {
      out += "null";
      i += 3;
    } else if (text.compare(i, 8, "Infinity") == 0) {
      out += kMaxDouble;
      i += 8;
    } else if (text.compare(i, 9, "-Infinity") == 0) {
      out += "-";
      out += kMaxDouble;
      i += 9;
    } else if (digit(c) || (c == '-' && i + 1 < text.size() && digit(text[i + 1]))) {
      const size_t from = i;
      if (c == '-') ++i;
      size_t digits = 0;
      while (i < text.size() && digit(text[i])) ++i, ++digits;
      bool integer = true;
      if (i < text.size() && text[i] == '.') {
        integer = false;
        ++i;
        while (i < text.size() && digit(text[i])) ++i;
      }
      if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
        integer = false;
        ++i;
        if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
        while (i < text.size() && digit(text[i])) ++i;
      }
      const std::string number(text.substr(from, i - from));
      const bool negative = c == '-';
      if (integer && digits > 18) {
        errno = 0;
        const long long v = std::strtoll(number.c_str(), nullptr, 10);
        out += errno == ERANGE ? (negative ? "-9223372036854775808" : "9223372036854775807") : std::to_string(v);
      } else if (!integer && std::isinf(std::strtod(number.c_str(), nullptr))) {
        if (negative) out += "-";
        out += kMaxDouble;
      } else {
        out += number;
      }
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

std::optional<std::string> json_limit_problem(std::string_view text, size_t max_depth, uint64_t max_bytes,
                                              uint64_t max_values) {
  if (text.size() > max_bytes) {
    return "JSON larger than " + mib(max_bytes) + " (" + std::to_string(text.size()) + " bytes)";
  }
  const JsonShape shape = measure_json(text, max_depth);
  if (shape.depth > max_depth) return "JSON nested deeper than " + std::to_string(max_depth) + " levels";
  if (shape.values > max_values) return "JSON of more than " + std::to_string(max_values) + " values";
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

CborShape measure_cbor(std::string_view bytes, size_t max_depth, uint64_t max_decoded_bytes) {
  // What from_cbor allocates, measured with mallinfo2 (tests/unit/test_worker.cc
  // holds the estimate above what decoding really takes): a value is 16 bytes
  // where it sits (an array's buffer, a map's node, the top); an array's
  // vector and a map's tree are a block each, a map entry a node of 96 with
  // its key inline up to 15 bytes, a string or byte string a block of 48 and
  // one more for its text past 15 bytes (any bytes for a byte string).
  constexpr uint64_t kSlot = 16, kArray = 32, kMap = 64, kEntry = 96, kString = 48, kBlock = 32;
  CborShape shape;
  shape.decoded_bytes = kSlot;
  // Items still to read at each open level, and whether it is a map (whose
  // keys sit at even counts); the top level holds one item.
  struct Level {
    uint64_t left;
    bool map;
  };
  std::vector<Level> open{{1, false}};
  size_t at = 0;
  while (!open.empty()) {
    if (open.back().left == 0) {
      open.pop_back();
      continue;
    }
    const bool key = open.back().map && open.back().left % 2 == 0;
    --open.back().left;
    if (at >= bytes.size()) return shape;
    ++shape.values;
    const auto initial = static_cast<unsigned char>(bytes[at++]);
    const unsigned major = initial >> 5, info = initial & 31;
    uint64_t argument = info;
    if (info >= 24) {
      if (info > 27) return shape;  // reserved, or an indefinite length / break: to_cbor writes none
      const size_t size = size_t{1} << (info - 24);
      if (bytes.size() - at < size) return shape;
      argument = 0;
      for (size_t i = 0; i < size; ++i) argument = (argument << 8) | static_cast<unsigned char>(bytes[at++]);
    }
    uint64_t cost = key ? kEntry : 0;
    switch (major) {
      case 2:  // byte string
      case 3:  // text string
        if (bytes.size() - at < argument) return shape;
        at += static_cast<size_t>(argument);
        if (key) {
          if (argument > 15) cost += kBlock;
        } else {
          cost += kString + (argument > (major == 2 ? 0 : 15) ? kBlock : 0);
        }
        break;
      case 4:  // array
      case 5:  // map: a key and a value an entry
        if (major == 5 && argument > UINT64_MAX / 2) return shape;
        if (open.size() > max_depth) return shape;
        // Its elements' slots: every element is in `bytes`, so the product is small.
        cost += major == 5 ? kMap : kArray + (argument > 0 && argument <= bytes.size() ? argument * kSlot + kSlot : 0);
        open.push_back({major == 5 ? argument * 2 : argument, major == 5});
        shape.depth = std::max(shape.depth, open.size() - 1);
        break;
      case 6:  // tag: from_cbor refuses them
        return shape;
      default:  // 0, 1: integers; 7: simple values and floats, whose bytes the argument held
        break;
    }
    shape.decoded_bytes += cost;
    if (shape.decoded_bytes > max_decoded_bytes) return shape;
  }
  shape.well_formed = at == bytes.size();
  return shape;
}

}  // namespace tsarchive
