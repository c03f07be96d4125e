#include "base/utf8.h"

#include <cstring>

namespace tsarchive {
namespace {

constexpr uint64_t kOnes = 0x0101010101010101ULL;
constexpr uint64_t kHighs = 0x8080808080808080ULL;

uint64_t word_at(std::string_view s, size_t i) {
  uint64_t w;
  std::memcpy(&w, s.data() + i, sizeof w);
  return w;
}

// Whether all eight bytes of `w` are printable ASCII (0x20..0x7e): no byte
// below 0x20 (the borrow of w - 0x20.. sets a high bit only there, bytes with
// their own high bit aside) and none at 0x7f or above (adding 1 carries into
// the high bit). A word that fails is looked at byte by byte.
bool printable_ascii_word(uint64_t w) {
  const uint64_t below_space = (w - 0x20 * kOnes) & ~w & kHighs;
  const uint64_t del_or_high = ((w + kOnes) | w) & kHighs;
  return (below_space | del_or_high) == 0;
}

}  // namespace

size_t utf8_sequence_at(std::string_view text, size_t i, uint32_t& cp) {
  const auto c = static_cast<unsigned char>(text[i]);
  size_t len = 0;
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
  else return 0;
  if (i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto cc = static_cast<unsigned char>(text[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_valid_utf8(std::string_view text) {
  uint32_t cp = 0;
  for (size_t i = 0, len = 0; i < text.size(); i += len) {
    if (i + 8 <= text.size() && (word_at(text, i) & kHighs) == 0) {  // eight ASCII bytes at once
      len = 8;
      continue;
    }
    if (static_cast<unsigned char>(text[i]) < 0x80) {  // ASCII, the usual case, without decoding
      len = 1;
      continue;
    }
    if ((len = utf8_sequence_at(text, i, cp)) == 0) return false;
  }
  return true;
}

bool is_printable_utf8(std::string_view s) {
  uint32_t cp = 0;
  for (size_t i = 0, len = 0; i < s.size(); i += len) {
    if (i + 8 <= s.size() && printable_ascii_word(word_at(s, i))) {  // eight at once
      len = 8;
      continue;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c >= 0x20 && c < 0x7f) || c == '\n') {  // printable ASCII and line feeds, without decoding
      len = 1;
      continue;
    }
    if ((len = utf8_sequence_at(s, i, cp)) == 0) return false;
    if ((cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0x7f) return false;
  }
  return true;
}


}  // namespace tsarchive
