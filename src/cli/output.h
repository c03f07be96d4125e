// Text output for people: aligned tables and human-readable numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "operations/notes.h"

#include "base/error.h"
#include "base/strings.h"
#include "base/terminal_text.h"

namespace tsarchive::cli {

struct Context;

// Text from an archive or a model as one field of a line: control, C1 and
// bidi characters and bytes that are not UTF-8 escaped (terminal_text.h).
inline std::string printable(std::string_view text) { return escape_text(text, TextEscape::Line); }

namespace detail {
// A string buffer whose text can be seen without the copy str() makes (C++17
// has no stringbuf::view()): what was written is [pbase, pptr).
class TextBuffer : public std::stringbuf {
 public:
  TextBuffer() : std::stringbuf(std::ios_base::out) {}
  std::string_view view() const { return {pbase(), static_cast<size_t>(pptr() - pbase())}; }
};
}  // namespace detail

// Writes what `render` writes to a buffer, escaped as a block (only \n, \t
// and \r\n stay): the gate between every text report and the terminal. JSON
// output does not go through it.
template <class Render>
void write_text(std::ostream& out, Render&& render) {
  detail::TextBuffer buffer;
  std::ostream text(&buffer);
  render(text);
  const std::string_view rendered = buffer.view();
  if (needs_escape(rendered, TextEscape::Block)) {
    out << escape_text(rendered, TextEscape::Block);
  } else {
    out.write(rendered.data(), static_cast<std::streamsize>(rendered.size()));
  }
}

// A JSON document as text (indent 2), strings exact. JSON strings must be
// UTF-8, so in a string that is not (a hostile entry name), each byte that is
// not part of valid UTF-8 is written as the escape \udcXX, XX the byte: the
// lossless rule of Python's "surrogateescape" (man page, TEXT OUTPUT), which
// json.loads(text) then .encode("utf-8", "surrogateescape") turns back into
// the bytes. Documents without such strings are nlohmann's dump(2).
// `indent` -1: the whole document on one line (JSON Lines).
template <class Json>
std::string json_text(const Json& doc, int indent = 2);

// The one place the program's own lines on stderr are formatted, every part
// escaped as one field (printable()), since messages quote names and text from
// archives:
//   tsarchive: error: <what> (<file>): <hint>
//   tsarchive: warning: <what> (<file>)
//   tsarchive: note: <note>
void print_error(std::ostream& err, const Error& e);
void print_warning(std::ostream& err, std::string_view what, std::string_view file);
void print_note(std::ostream& err, std::string_view note);
// An operation's notes (operations/notes.h), printed as print_note does.
NoteSink notes_on(std::ostream& err);

// The exception in flight as an Error: an Error as it is; std::bad_alloc and
// any other exception: ErrorKind::Internal (6), saying what to do.
Error current_error();

// An error as JSON (schema tsarchive.error/1): kind ("check_failed", "usage",
// "bad_input", "io", "torch", "internal"), file, message, hint and exit_code,
// every key always there ("" when the error has no file or hint). With
// --json, a command that fails writes it on stdout besides the line on stderr.
nlohmann::ordered_json error_to_json(const Error& e);

// A measurement as JSON: null when there is none or it is not finite.
nlohmann::ordered_json number_or_null(const std::optional<double>& x);

// The one catch (cli.cc): prints the line for the exception in flight and
// returns its exit code (current_error()), adding its detail() when
// `verbose`. With `json_out` (the command was given --json), also writes
// error_to_json() there as one document (`indent` as json_text's).
int report_current_exception(std::ostream& err, bool verbose, std::ostream* json_out = nullptr, int indent = 2);

// --color=auto|always|never: always and never as they say; auto: when `fd`
// is a terminal, TERM is not "dumb" and NO_COLOR is unset or empty.
bool choose_color(const std::string& when, int fd);
// Colours the "tsarchive: error|warning|note:" prefixes of the lines above
// (bold red, yellow, cyan); off by default. The text after a prefix stays
// exactly as without colour.
void color_stderr(bool on);

// Whether ctx.out is coloured: --color=always, or auto with ctx.out on a
// terminal (choose_color). Only verify's verdict line is.
bool color_out(const Context& ctx);
// `text` in the SGR colour `sgr` ("32": green) and back to normal.
std::string painted(std::string_view text, const char* sgr);

// True when ctx.out writes to the process's stdout and that is a terminal.
bool out_is_terminal(const Context& ctx);

// Where a command's report goes: stdout, or stderr when stdout carries the
// data (-o -, --save-outputs -); nowhere under -q either way.
std::ostream& report_stream(Context& ctx, bool data_on_stdout);

// Error(Usage) when `-` (`flag`: "-o -") would write `what` ("the edited
// archive"), binary, on ctx.data and that is a terminal: a ZIP or a
// torch.save file carries its author's bytes, escape sequences among them.
void refuse_binary_on_terminal(const Context& ctx, const std::string& flag, const std::string& what);

// The content of a file from an archive (`what`: "extra file 'x'") on
// ctx.out: its exact bytes to a pipe or a file; to a terminal, binary
// (not UTF-8 text) is refused (exit 2) and text with control, C1 or bidi
// characters is written escaped, with a note saying how to get the bytes.
void write_content(Context& ctx, std::string_view bytes, const std::string& what, const std::string& raw_hint);

// Writes `bytes` to the file `path` atomically, or to ctx.out when `path` is
// "-" (standard output: --save-outputs -, extra get -o -).
void write_output_file(Context& ctx, const std::string& path, std::string_view bytes);

// "1 tensor", "1,024 tensors"
std::string plural(uint64_t n, const char* word);
// Milliseconds with the decimals their size deserves: "0.012", "45.68", "1203".
std::string ms_text(double ms);
using tsarchive::shape_text;  // base/strings.h: "[3, 16]", "[]"

class TextTable {
 public:
  enum class Align { Left, Right };
  explicit TextTable(std::vector<std::string> headers, std::vector<Align> align = {});
  // Each cell is escaped as one field (printable()): a name with a line feed
  // cannot fake a row. Missing cells are empty.
  void add_row(std::vector<std::string> cells);
  // The same from views, each copied once into the table (a braced list of
  // std::strings would be copied into the list, then again into a vector).
  void add_row(std::initializer_list<std::string_view> cells);
  void reserve(size_t rows);
  bool empty() const { return cells_.empty(); }
  // Writes the table indented by `indent` spaces; no trailing spaces.
  void print(std::ostream& out, int indent = 2) const;

 private:
  void add_cell(std::string cell);

  std::vector<std::string> headers_;
  std::vector<Align> align_;
  std::vector<std::string> cells_;  // row after row, headers_.size() each
  std::vector<size_t> widths_;      // display_width of each cell, as cells_
};

// Display width of UTF-8 text (code points; good enough for names and previews).
size_t display_width(std::string_view s);

namespace detail {

// `s` with each byte that is not part of valid UTF-8 replaced by `marker`
// (UTF-8 of a character no string of the document holds) and two hex digits.
std::string mark_invalid_utf8(const std::string& s, const std::string& marker);
// Every marker + two hex digits in `text` as \udcXX.
std::string unmark_invalid_utf8(const std::string& text, const std::string& marker);
bool valid_utf8(const std::string& s);

template <class Json, class F>
void for_each_string(const Json& j, F&& f) {
  if (j.is_string()) {
    f(j.template get_ref<const typename Json::string_t&>());
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      f(it.key());
      for_each_string(it.value(), f);
    }
  } else if (j.is_array()) {
    for (const Json& item : j) for_each_string(item, f);
  }
}

template <class Json>
Json marked(const Json& j, const std::string& marker) {
  if (j.is_string()) return Json(mark_invalid_utf8(j.template get_ref<const typename Json::string_t&>(), marker));
  if (j.is_array()) {
    Json out = Json::array();
    for (const Json& item : j) out.push_back(marked(item, marker));
    return out;
  }
  if (j.is_object()) {
    Json out = Json::object();
    for (auto it = j.begin(); it != j.end(); ++it) out[mark_invalid_utf8(it.key(), marker)] = marked(it.value(), marker);
    return out;
  }
  return j;
}

template <class Json>
std::string json_text_raw(const Json& doc, int indent) {
  bool all_valid = true;
  detail::for_each_string(doc, [&](const std::string& s) { all_valid = all_valid && detail::valid_utf8(s); });
  if (all_valid) return doc.dump(indent);
  // A private-use character no string holds marks the bytes to rewrite.
  for (uint32_t cp = 0xE000; cp <= 0xF8FF; ++cp) {
    const std::string marker{static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                             static_cast<char>(0x80 | (cp & 0x3F))};
    bool used = false;
    detail::for_each_string(doc, [&](const std::string& s) { used = used || s.find(marker) != std::string::npos; });
    if (!used) return detail::unmark_invalid_utf8(detail::marked(doc, marker).dump(indent), marker);
  }
  return doc.dump(indent, ' ', false, Json::error_handler_t::replace);  // 6400 private-use characters in use: U+FFFD
}
}  // namespace detail

// C1 controls, bidi controls and what draws nothing are written as \u
// escapes (terminal_text.h: json_escape_invisible): the same strings to a
// parser, nothing a terminal acts on when the JSON is printed.
template <class Json>
std::string json_text(const Json& doc, int indent) {
  return json_escape_invisible(detail::json_text_raw(doc, indent));
}

}  // namespace tsarchive::cli
