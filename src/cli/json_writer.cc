#include "cli/json_writer.h"

#include <algorithm>
#include <charconv>

#include "base/terminal_text.h"
#include "base/utf8.h"

namespace tsarchive::cli {
namespace {

constexpr char kHex[] = "0123456789abcdef";

}  // namespace

void JsonWriter::flush() {
  if (sink_ == nullptr) {
    out_.resize(used_);
    return;
  }
  sink_->write(out_.data(), static_cast<std::streamsize>(used_));
  used_ = 0;
}

void JsonWriter::grow(size_t n) {
  if (sink_ != nullptr && used_ >= kChunk) flush();
  if (used_ + n > out_.size()) out_.resize(std::max(used_ + n, 2 * out_.size() + 256));
}

void JsonWriter::open(char bracket) {
  before_value();
  put(bracket);
  empty_.push_back(1);
}

void JsonWriter::close(char bracket) {
  const bool was_empty = empty_.back();
  empty_.pop_back();
  if (!was_empty && indent_ >= 0) line_break(empty_.size(), 1);
  put(bracket);
}

void JsonWriter::value(bool b) {
  before_value();
  if (b) {
    put("true", 4);
  } else {
    put("false", 5);
  }
}

void JsonWriter::value(std::nullptr_t) {
  before_value();
  put("null", 4);
}

void JsonWriter::value(double d) {
  before_value();
  const std::string text = nlohmann::ordered_json(d).dump();  // nlohmann's shortest round-trip form ("1e-05", "0.5")
  put(text.data(), text.size());
}

void JsonWriter::integer(uint64_t bits, bool negative) {
  before_value();
  constexpr size_t kDigits = 24;
  char* to = room(kDigits);
  const auto end = negative ? std::to_chars(to, to + kDigits, static_cast<int64_t>(bits)).ptr
                            : std::to_chars(to, to + kDigits, bits).ptr;
  used_ += static_cast<size_t>(end - to);
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
    default: {  // null, and the binary and discarded values no report holds
      before_value();
      const std::string text = j.dump();
      put(text.data(), text.size());
      return;
    }
  }
}

void JsonWriter::escaped(std::string_view s, size_t from) {
  size_t i = from;
  while (i < s.size()) {
    size_t run = i;
    while (run < s.size() && plain_byte(static_cast<unsigned char>(s[run]))) ++run;
    put(s.data() + i, run - i);
    if ((i = run) == s.size()) break;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      uint32_t cp = 0;
      const size_t len = utf8_sequence_at(s, i, cp);
      if (len == 0) {  // not UTF-8: Python's surrogateescape, as json_text
        const char escape[] = {'\\', 'u', 'd', 'c', kHex[c >> 4], kHex[c & 15]};
        put(escape, sizeof escape);
        ++i;
      } else if (hidden_or_control(cp)) {  // as json_text: \u escapes, nothing a terminal acts on
        const std::string escape = json_escape_invisible(std::string(s.substr(i, len)));
        put(escape.data(), escape.size());
        i += len;
      } else {
        put(s.data() + i, len);
        i += len;
      }
      continue;
    }
    switch (c) {
      case '"': put("\\\"", 2); break;
      case '\\': put("\\\\", 2); break;
      case '\b': put("\\b", 2); break;
      case '\t': put("\\t", 2); break;
      case '\n': put("\\n", 2); break;
      case '\f': put("\\f", 2); break;
      case '\r': put("\\r", 2); break;
      default: {
        const char escape[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        put(escape, sizeof escape);
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
