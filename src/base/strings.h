// Small text helpers every layer uses: suffix tests and the short forms of
// sizes and numbers that messages print.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tsarchive {

inline bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

inline bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// ASCII case folding, as miniz compares record names (nothing beyond 'A'-'Z').
inline char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
inline std::string ascii_lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_lower(c);
  return out;
}
inline bool ends_with_ignoring_case(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i) {
    if (ascii_lower(s[s.size() - suffix.size() + i]) != ascii_lower(suffix[i])) return false;
  }
  return true;
}

// "512 B", "16.1 KiB", "1.3 GiB"
std::string human_size(uint64_t bytes);

// Four significant digits: enough to see a value, short enough for a table.
std::string short_number(double x);

// "[3, 16]", "[]"
std::string shape_text(const std::vector<int64_t>& shape);

// "1,234,567"
std::string with_commas(uint64_t n);

// The first `shown` of `names` and how many more: "a, b, c and 4 more".
std::string some_names(const std::vector<std::string>& names, size_t shown);

// `text` as one word for POSIX shells and bash, to paste into a command line a
// hint suggests: as it is when it holds only [A-Za-z0-9_./:=@%+,-]; else in
// single quotes ('\'' for a quote) when it is printable ASCII; else in bash's
// $'...' with every other byte as \xHH. A name from an archive or a folder
// never becomes shell syntax, and the command names exactly its bytes.
std::string shell_quoted(std::string_view text);

}  // namespace tsarchive
