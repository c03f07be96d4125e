#include "base/terminal_text.h"

#include <cstdint>

#include "base/utf8.h"

namespace tsarchive {
namespace {

bool is_bidi_control(uint32_t cp) {
  return cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

// Characters that draw nothing, or break a line where a reader sees none:
// two names that differ only by them look the same, and U+2028/U+2029 end a
// line in some viewers and log tools (a forged "tsarchive:" line after them).
bool is_invisible_or_separator(uint32_t cp) {
  return cp == 0x180E || cp == 0x200B || cp == 0x2028 || cp == 0x2029 || (cp >= 0x2060 && cp <= 0x2064) ||
         cp == 0xFEFF;
}

constexpr char kHex[] = "0123456789abcdef";

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
    } else if ((cp >= 0x80 && cp <= 0x9F) || is_bidi_control(cp) || is_invisible_or_separator(cp)) {
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

bool escape_would_change(std::string_view text, TextEscape mode) {
  bool changed = false;
  walk(
      text, mode, [](std::string_view) {}, [&](const std::string&) { changed = true; });
  return changed;
}

}  // namespace tsarchive
