#include "cli/json_writer.h"

#include <charconv>

#include "base/utf8.h"

namespace tsarchive::cli {
namespace {

constexpr char kHex[] = "0123456789abcdef";

}  // namespace

void JsonWriter::flush() {
  if (sink_ == nullptr) return;
  sink_->write(out_.data(), static_cast<std::streamsize>(out_.size()));
  out_.clear();
}

void JsonWriter::open(char bracket) {
  before_value();
  out_ += bracket;
  empty_.push_back(1);
}

void JsonWriter::close(char bracket) {
  const bool was_empty = empty_.back();
  empty_.pop_back();
  if (!was_empty && indent_ >= 0) newline_indent(empty_.size());
  out_ += bracket;
}

void JsonWriter::value(bool b) {
  before_value();
  out_ += b ? "true" : "false";
}

void JsonWriter::value(std::nullptr_t) {
  before_value();
  out_ += "null";
}

void JsonWriter::value(double d) {
  before_value();
  out_ += nlohmann::ordered_json(d).dump();  // nlohmann's shortest round-trip form ("1e-05", "0.5")
}

void JsonWriter::integer(uint64_t bits, bool negative) {
  before_value();
  char digits[24];
  const auto end = negative ? std::to_chars(digits, digits + sizeof digits, static_cast<int64_t>(bits)).ptr
                            : std::to_chars(digits, digits + sizeof digits, bits).ptr;
  out_.append(digits, static_cast<size_t>(end - digits));
}

void JsonWriter::value(const nlohmann::ordered_json& j) {
  using Type = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case Type::object:
      begin_object();
      for (auto it = j.begin(); it != j.end(); ++it) {
        key(it.key());
        value(it.value());
      }
      end_object();
      return;
    case Type::array:
      begin_array();
      for (const auto& item : j) value(item);
      end_array();
      return;
    case Type::string: return value(j.get_ref<const std::string&>());
    case Type::boolean: return value(j.get<bool>());
    case Type::number_integer: return value(j.get<int64_t>());
    case Type::number_unsigned: return value(j.get<uint64_t>());
    case Type::number_float: return value(j.get<double>());
    default:  // null, and the binary and discarded values no report holds
      before_value();
      out_ += j.dump();
      return;
  }
}

void JsonWriter::escaped(std::string_view s, size_t from) {
  size_t i = from;
  while (i < s.size()) {
    size_t run = i;
    while (run < s.size() && plain_byte(static_cast<unsigned char>(s[run]))) ++run;
    out_.append(s.data() + i, run - i);
    if ((i = run) == s.size()) break;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      uint32_t cp = 0;
      const size_t len = utf8_sequence_at(s, i, cp);
      if (len == 0) {  // not UTF-8: Python's surrogateescape, as json_text
        const char escape[] = {'\\', 'u', 'd', 'c', kHex[c >> 4], kHex[c & 15]};
        out_.append(escape, sizeof escape);
        ++i;
      } else {
        out_.append(s.data() + i, len);
        i += len;
      }
      continue;
    }
    switch (c) {
      case '"': out_ += "\\\""; break;
      case '\\': out_ += "\\\\"; break;
      case '\b': out_ += "\\b"; break;
      case '\t': out_ += "\\t"; break;
      case '\n': out_ += "\\n"; break;
      case '\f': out_ += "\\f"; break;
      case '\r': out_ += "\\r"; break;
      default: {
        const char escape[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out_.append(escape, sizeof escape);
      }
    }
    ++i;
  }
}

nlohmann::ordered_json& JsonBuilder::put(nlohmann::ordered_json v) {
  if (stack_.empty()) {
    root_ = std::move(v);
    return root_;
  }
  nlohmann::ordered_json& parent = *stack_.back();
  if (parent.is_array()) {
    parent.push_back(std::move(v));
    return parent.back();
  }
  return parent[key_] = std::move(v);
}

}  // namespace tsarchive::cli
