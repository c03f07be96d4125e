// JSON documents written member by member, by one description and two back
// ends with the same calls (begin_object, key, value, end_object, ...):
//   JsonWriter   streams the text into a string as json_text(doc, indent)
//                (output.h) writes the document built the same way, byte for
//                byte: nlohmann's layout and escapes, and each byte that is
//                not part of valid UTF-8 as \udcXX. No document is built, so
//                a report of thousands of tensors costs one pass over them.
//                Given a stream, it hands the text on in chunks of about
//                kChunk bytes (and the rest at flush()), so that the whole
//                text is never held: a 2,000-tensor report is 1.4 MB.
//   JsonBuilder  builds the nlohmann::ordered_json document.
// A renderer written as a template over its back end gives both the text
// (inspect --json) and the document (tests compare the two).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace tsarchive::cli {

class JsonWriter {
 public:
  // `indent` as json_text's: spaces per level, -1 for one line. The text is
  // in `out` after flush().
  JsonWriter(std::string& out, int indent) : out_(out), indent_(indent) { out_.clear(); }
  // Writes to `sink`, through `buffer`, in chunks; flush() writes the rest.
  JsonWriter(std::string& buffer, int indent, std::ostream& sink)
      : out_(buffer), indent_(indent), sink_(&sink) {
    out_.assign(kChunk + kChunk / 4, '\0');
  }
  static constexpr size_t kChunk = 64 * 1024;
  // With a sink, writes what is not written yet; without one, cuts `out` to
  // the text.
  void flush();

  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }
  // The next member's name, inside an object; its value follows.
  void key(std::string_view name) {
    before_value();
    quoted(name);
    put("\": ", indent_ >= 0 ? 3 : 2);
    after_key_ = true;
  }

  void value(std::string_view s) {
    before_value();
    quoted(s);
    put('"');
  }
  void value(const std::string& s) { value(std::string_view(s)); }
  void value(const char* s) { value(std::string_view(s)); }
  void value(bool b);
  void value(std::nullptr_t);
  void value(double d);
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  void value(T n) {
    if constexpr (std::is_signed_v<T>) {
      integer(static_cast<int64_t>(n), n < 0);
    } else {
      integer(static_cast<uint64_t>(n), false);
    }
  }
  // A whole document made elsewhere (a nested report's own JSON).
  void value(const nlohmann::ordered_json& j);

 private:
  // The text is out_[0, used_); what follows is room already allocated, so
  // that most writes are a bounds check and a copy.
  char* room(size_t n) {
    if (used_ + n > out_.size()) grow(n);
    return out_.data() + used_;
  }
  void grow(size_t n);  // with a sink, hands a full chunk on first
  void put(const char* p, size_t n) {
    std::memcpy(room(n), p, n);
    used_ += n;
  }
  void put(char c) {
    *room(1) = c;
    ++used_;
  }
  void open(char bracket);
  void close(char bracket);
  // The comma and the line break that come before an element (inline: it
  // comes before every key and value).
  void before_value() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (empty_.empty()) return;  // the document itself
    const bool first = empty_.back() != 0;
    empty_.back() = 0;
    if (indent_ < 0) {
      if (!first) put(',');
    } else {
      line_break(empty_.size(), first ? 1 : 0);
    }
  }
  // ",\n" and the indentation of `depth` in one copy, from breaks_ (from its
  // `from`th byte: 1 leaves the comma out).
  void line_break(size_t depth, size_t from) {
    const size_t end = 2 + depth * static_cast<size_t>(indent_);
    if (breaks_.size() < end) breaks_.resize(end + 16 * static_cast<size_t>(indent_), ' ');
    put(breaks_.data() + from, end - from);
  }
  void integer(uint64_t magnitude_or_bits, bool negative);
  // The opening quote and `s` escaped; the caller closes it (a key adds ": ").
  // The bytes that need no escape are copied as they are scanned.
  void quoted(std::string_view s) {
    char* to = room(1 + s.size());
    *to++ = '"';
    size_t plain = 0;
    while (plain < s.size() && plain_byte(static_cast<unsigned char>(s[plain]))) {
      to[plain] = s[plain];
      ++plain;
    }
    used_ += 1 + plain;
    if (plain < s.size()) escaped(s, plain);
  }
  // Bytes a JSON string holds as they are: not a quote, backslash or control
  // character, nor the start of a multi-byte sequence (which is checked).
  static bool plain_byte(unsigned char c) { return c >= 0x20 && c != '"' && c != '\\' && c < 0x80; }
  void escaped(std::string_view s, size_t from);  // the rest of quoted(), from the first byte to escape

  std::string& out_;
  size_t used_ = 0;
  int indent_;
  std::ostream* sink_ = nullptr;
  std::vector<uint8_t> empty_;  // per open container: nothing in it yet
  bool after_key_ = false;
  std::string breaks_ = ",\n";  // and spaces, as deep as the document has gone
};

class JsonBuilder {
 public:
  void begin_object() { open(nlohmann::ordered_json::object()); }
  void end_object() { stack_.pop_back(); }
  void begin_array() { open(nlohmann::ordered_json::array()); }
  void end_array() { stack_.pop_back(); }
  void key(std::string_view name) { key_ = name; }
  template <class T>
  void value(T&& v) {
    put(nlohmann::ordered_json(std::forward<T>(v)));
  }
  void value(std::string_view s) { put(nlohmann::ordered_json(std::string(s))); }
  void value(std::nullptr_t) { put(nlohmann::ordered_json(nullptr)); }

  nlohmann::ordered_json take() { return std::move(root_); }

 private:
  nlohmann::ordered_json& put(nlohmann::ordered_json v);
  void open(nlohmann::ordered_json empty) { stack_.push_back(&put(std::move(empty))); }

  nlohmann::ordered_json root_;
  std::vector<nlohmann::ordered_json*> stack_;
  std::string key_;
};

// What both back ends share on top of those calls.
template <class W, class T>
void member(W& w, std::string_view name, const T& v);

template <class W, class T>
void write_value(W& w, const T& v) {
  w.value(v);
}
template <class W, class T>
void write_value(W& w, const std::vector<T>& items) {
  w.begin_array();
  for (const T& item : items) write_value(w, item);
  w.end_array();
}
template <class W, class T>
void write_value(W& w, const std::optional<T>& v) {
  if (v) {
    write_value(w, *v);
  } else {
    w.value(nullptr);
  }
}

template <class W, class T>
void member(W& w, std::string_view name, const T& v) {
  w.key(name);
  write_value(w, v);
}

// The member `name`: an object whose members `members()` writes.
template <class W, class F>
void object_member(W& w, std::string_view name, F&& members) {
  w.key(name);
  w.begin_object();
  members();
  w.end_object();
}

// The member `name`: an array of one object per item, whose members
// `members(item)` writes.
template <class W, class Items, class F>
void object_array(W& w, std::string_view name, const Items& items, F&& members) {
  w.key(name);
  w.begin_array();
  for (const auto& item : items) {
    w.begin_object();
    members(item);
    w.end_object();
  }
  w.end_array();
}

}  // namespace tsarchive::cli
