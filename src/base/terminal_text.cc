#include "base/terminal_text.h"

#include <cstdint>

#include "base/utf8.h"

namespace tsarchive {
namespace {

constexpr char kHex[] = "0123456789abcdef";

bool is_bidi_control(uint32_t cp) {
  return cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

// Unicode's Default_Ignorable_Code_Point characters draw nothing: two names
// that differ only by them look the same (DerivedCoreProperties.txt; the
// bidi controls among them are above). In a block of text the joiners and
// variation selectors stay, as scripts and emoji are spelled with them.
bool is_default_ignorable(uint32_t cp, TextEscape mode) {
  if (mode == TextEscape::Block && (cp == 0x200C || cp == 0x200D || (cp >= 0xFE00 && cp <= 0xFE0F))) return false;
  return cp == 0x00AD || cp == 0x034F || cp == 0x115F || cp == 0x1160 || cp == 0x17B4 || cp == 0x17B5 ||
         (cp >= 0x180B && cp <= 0x180F) || (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x2060 && cp <= 0x206F) ||
         cp == 0x3164 || (cp >= 0xFE00 && cp <= 0xFE0F) || cp == 0xFEFF || cp == 0xFFA0 ||
         (cp >= 0xFFF0 && cp <= 0xFFF8) || (cp >= 0x1BCA0 && cp <= 0x1BCA3) || (cp >= 0x1D173 && cp <= 0x1D17A) ||
         (cp >= 0xE0000 && cp <= 0xE0FFF);
}

// U+2028 and U+2029 end a line in some viewers and log tools: a forged
// "tsarchive:" line after them.
bool is_line_separator(uint32_t cp) { return cp == 0x2028 || cp == 0x2029; }

// \uHHHH, or \UHHHHHH above the Basic Multilingual Plane.
std::string unicode_escape(uint32_t cp) {
  std::string out = cp > 0xFFFF ? "\\U" : "\\u";
  for (int shift = cp > 0xFFFF ? 20 : 12; shift >= 0; shift -= 4) out += kHex[(cp >> shift) & 15];
  return out;
}

// Calls emit(bytes_kept) for text that stays and emit_escape(spelling) for
// what is escaped; one walk serves both functions below.
template <class Keep, class Escape>
void walk(std::string_view text, TextEscape mode, Keep&& keep, Escape&& escape) {
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp = 0;
    const size_t len = utf8_sequence_at(text, i, cp);
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
    } else if ((cp >= 0x80 && cp <= 0x9F) || is_bidi_control(cp) || is_line_separator(cp) || is_default_ignorable(cp, mode)) {
      escape(unicode_escape(cp));
    } else {
      keep(text.substr(i, len));
    }
    i += len;
  }
}

}  // namespace

bool hidden_or_control(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || is_bidi_control(cp) || is_line_separator(cp) ||
         is_default_ignorable(cp, TextEscape::Line);
}

std::string json_escape_invisible(std::string json) {
  size_t i = 0;
  while (i < json.size() && static_cast<unsigned char>(json[i]) < 0x80) ++i;
  if (i == json.size()) return json;
  std::string out = json.substr(0, i);
  const auto u_escape = [&](uint32_t unit) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(unit >> shift) & 15];
  };
  while (i < json.size()) {
    uint32_t cp = 0;
    const size_t len = static_cast<unsigned char>(json[i]) < 0x80 ? 0 : utf8_sequence_at(json, i, cp);
    if (len == 0 || !hidden_or_control(cp)) {
      const size_t n = len == 0 ? 1 : len;
      out.append(json, i, n);
      i += n;
      continue;
    }
    if (cp > 0xFFFF) {
      u_escape(0xD800 + ((cp - 0x10000) >> 10));
      u_escape(0xDC00 + ((cp - 0x10000) & 0x3FF));
    } else {
      u_escape(cp);
    }
    i += len;
  }
  return out;
}

std::string escape_text(std::string_view text, TextEscape mode) {
  if (!needs_escape(text, mode)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 16);
  walk(
      text, mode, [&](std::string_view kept) { out.append(kept); },
      [&](const std::string& spelling) { out += spelling; });
  return out;
}

bool escape_would_change(std::string_view text, TextEscape mode) {
  bool changed = false;
  walk(
      text, mode, [](std::string_view) {}, [&](const std::string&) { changed = true; });
  return changed;
}

}  // namespace tsarchive
