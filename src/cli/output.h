// Text output for people: aligned tables and human-readable numbers.
#pragma once

#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tsarchive/terminal_text.h"

namespace tsarchive::cli {

struct Context;

// Text from an archive or a model as one field of a line: control, C1 and
// bidi characters and bytes that are not UTF-8 escaped (terminal_text.h).
inline std::string shown(std::string_view text) { return escape_text(text, TextEscape::Line); }

// Writes what `render` writes to a buffer, escaped as a block (only \n, \t
// and \r\n stay): the gate between every text report and the terminal. JSON
// output does not go through it.
template <class Render>
void write_text(std::ostream& out, Render&& render) {
  std::ostringstream text;
  render(text);
  out << escape_text(text.str(), TextEscape::Block);
}

// "tsarchive: note: NOTE" on `err`, the note escaped as one line.
void print_note(std::ostream& err, std::string_view note);

// True when ctx.out is the process's stdout and that is a terminal.
bool out_is_terminal(const Context& ctx);

// The content of a file from an archive (`what`: "extra file 'x'") on
// ctx.out: its exact bytes to a pipe or a file; to a terminal, binary
// (not UTF-8 text) is refused (exit 2) and text with control, C1 or bidi
// characters is written escaped, with a note saying how to get the bytes.
void write_content(Context& ctx, std::string_view bytes, const std::string& what, const std::string& raw_hint);

// "512 B", "16.1 KiB", "1.3 GiB"
std::string human_size(uint64_t bytes);
// "1,234,567"
std::string with_commas(uint64_t n);
// "1 tensor", "1,024 tensors"
std::string plural(uint64_t n, const char* word);
// Four significant digits: enough to see a value, short enough for a table.
std::string short_number(double x);
// Milliseconds with the decimals their size deserves: "0.012", "45.68", "1203".
std::string ms_text(double ms);
// "[3, 16]", "[]"
std::string shape_text(const std::vector<int64_t>& shape);

class TextTable {
 public:
  enum class Align { Left, Right };
  explicit TextTable(std::vector<std::string> headers, std::vector<Align> align = {});
  // Each cell is escaped as one field (shown()): a name with a line feed
  // cannot fake a row.
  void add_row(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }
  // Writes the table indented by `indent` spaces; no trailing spaces.
  void print(std::ostream& out, int indent = 2) const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

// Display width of UTF-8 text (code points; good enough for names and previews).
size_t display_width(const std::string& s);

}  // namespace tsarchive::cli
