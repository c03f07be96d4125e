// Text output for people: aligned tables and human-readable numbers.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace tsarchive::cli {

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
