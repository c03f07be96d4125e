// Text that came from an archive or a model, made safe to show on a terminal.
//
// Record names, extra file names and contents, class names, code, stamp fields
// and error messages that quote them are attacker-controlled: an ESC starts a
// terminal escape sequence, a CR or LF fakes a table row, U+009B is the C1
// form of ESC [, and the Unicode Bidi_Control characters reorder what the
// reader sees. Every text renderer passes what it prints through escape_text;
// JSON output does not (JSON escapes control characters itself, and stays
// exact; json_escape_invisible below writes the \u ones as JSON escapes).
// The spellings (documented in the man page, "TEXT OUTPUT"):
//   \t \n \r          tab, line feed, carriage return
//   \xHH              any other C0 control, DEL, and each byte that is not
//                     part of valid UTF-8 (HH: two lowercase hex digits)
//   \uHHHH            C1 controls U+0080..U+009F, the Bidi_Control
//   \UHHHHHH          characters U+061C, U+200E, U+200F, U+202A..U+202E,
//                     U+2066..U+2069, the line and paragraph separators
//                     U+2028, U+2029, and what draws nothing: Unicode's
//                     Default_Ignorable_Code_Point set (U+00AD, U+200B,
//                     U+FEFF, the tag characters U+E0000.., ...; in Block
//                     mode the joiners U+200C, U+200D and the variation
//                     selectors U+FE00..U+FE0F stay); \U above U+FFFF
// A backslash is left as it is, so text without those characters prints
// unchanged and escaping twice changes nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tsarchive {

enum class TextEscape {
  Line,   // one field (a name, a value, an error line): every control is escaped
  Block,  // multi-line text (code, a report, a file's content): \n, \t and the
          // \r of a \r\n pair are kept, everything else as for Line
};

// `text` with every byte or character named above written as its escape.
std::string escape_text(std::string_view text, TextEscape mode = TextEscape::Line);

// The characters escape_text spells as \u or \U in a line (C1 controls,
// Bidi_Control, U+2028/U+2029, Default_Ignorable_Code_Point): JSON output
// writes them as \u escapes too (json_escape_invisible), the same string to a
// JSON parser, and nothing a terminal or an editor would act on or hide.
bool hidden_or_control(uint32_t code_point);

// `json` (JSON text) with every character hidden_or_control names, as UTF-8,
// written as a \u escape (a surrogate pair above U+FFFF). Outside strings
// JSON text is ASCII, so only strings change, and only in spelling.
std::string json_escape_invisible(std::string json);

// True when escape_text(text, mode) would change `text`. Inline for its
// common case, printable ASCII (and in Block mode \n and \t), which never
// changes: reports check every cell of every table.
bool escape_would_change(std::string_view text, TextEscape mode);
inline bool needs_escape(std::string_view text, TextEscape mode = TextEscape::Line) {
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7F) continue;
    if (mode == TextEscape::Block && (c == '\n' || c == '\t')) continue;
    return escape_would_change(text, mode);
  }
  return false;
}

}  // namespace tsarchive
