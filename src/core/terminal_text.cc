#include "tsarchive/terminal_text.h"

#include <cstdint>

namespace tsarchive {
namespace {

// Length of the valid UTF-8 sequence at text[i] and its code point, or 0 when
// the byte there does not start one (stray continuation byte, overlong form,
// surrogate, above U+10FFFF, cut short).
size_t utf8_at(std::string_view text, size_t i, uint32_t& cp) {
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

bool is_bidi_control(uint32_t cp) {
  return cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

constexpr char kHex[] = "0123456789abcdef";

// Calls emit(bytes_kept) for text that stays and emit_escape(spelling) for
// what is escaped; one walk serves both functions below.
template <class Keep, class Escape>
void walk(std::string_view text, TextEscape mode, Keep&& keep, Escape&& escape) {
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp = 0;
    const size_t len = utf8_at(text, i, cp);
    if (len == 0) {  // not UTF-8: the byte itself
      const auto b = static_cast<unsigned char>(text[i]);
      escape(std::string{'\\', 'x', kHex[b >> 4], kHex[b & 15]});
      ++i;
      continue;
    }
    if (cp < 0x20 || cp == 0x7F) {
      const bool block = mode == TextEscape::Block;
      if (block && (cp == '\n' || cp == '\t' || (cp == '\r' && i + 1 < text.size() && text[i + 1] == '\n'))) {
        keep(text.substr(i, 1));
      } else if (cp == '\n') {
        escape("\\n");
      } else if (cp == '\r') {
        escape("\\r");
      } else if (cp == '\t') {
        escape("\\t");
      } else {
        escape(std::string{'\\', 'x', kHex[cp >> 4], kHex[cp & 15]});
      }
    } else if ((cp >= 0x80 && cp <= 0x9F) || is_bidi_control(cp)) {
      escape(std::string{'\\', 'u', kHex[(cp >> 12) & 15], kHex[(cp >> 8) & 15], kHex[(cp >> 4) & 15], kHex[cp & 15]});
    } else {
      keep(text.substr(i, len));
    }
    i += len;
  }
}

}  // namespace

std::string escape_text(std::string_view text, TextEscape mode) {
  if (!needs_escape(text, mode)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 16);
  walk(
      text, mode, [&](std::string_view kept) { out.append(kept); },
      [&](const std::string& spelling) { out += spelling; });
  return out;
}

bool needs_escape(std::string_view text, TextEscape mode) {
  // Fast path: printable ASCII (and, in Block mode, \n and \t) never changes.
  bool plain = true;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7F) continue;
    if (mode == TextEscape::Block && (c == '\n' || c == '\t')) continue;
    plain = false;
    break;
  }
  if (plain) return false;
  bool changed = false;
  walk(
      text, mode, [](std::string_view) {}, [&](const std::string&) { changed = true; });
  return changed;
}

}  // namespace tsarchive
