#include "base/strings.h"

#include <cstdio>

namespace tsarchive {

std::string human_size(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int unit = -1;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, kUnits[unit]);
  return buf;
}

std::string short_number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string with_commas(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string some_names(const std::vector<std::string>& names, size_t shown) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < shown; ++i) text += (i == 0 ? "" : ", ") + names[i];
  if (names.size() > shown) text += " and " + std::to_string(names.size() - shown) + " more";
  return text;
}

std::string shell_quoted(std::string_view text) {
  const auto plain = [](unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_./:=@%+,-").find(static_cast<char>(c)) != std::string_view::npos;
  };
  const auto printable = [](unsigned char c) { return c >= 0x20 && c < 0x7F; };
  bool all_plain = !text.empty(), all_printable = true;
  for (const char ch : text) {
    all_plain = all_plain && plain(static_cast<unsigned char>(ch));
    all_printable = all_printable && printable(static_cast<unsigned char>(ch));
  }
  if (all_plain) return std::string(text);
  std::string out;
  if (all_printable) {
    out = "'";
    for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  }
  constexpr char kHex[] = "0123456789abcdef";
  out = "$'";
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (printable(c) && c != '\'' && c != '\\') {
      out += ch;
    } else {
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out + "'";
}

}  // namespace tsarchive
