#include "base/base64.h"

#include <cstdint>

namespace tsarchive {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The 6-bit value of an alphabet character, -1 for any other byte.
int sextet(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool is_ascii_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::optional<std::string> fail(std::string* problem, std::string what) {
  if (problem != nullptr) *problem = std::move(what);
  return std::nullopt;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16 | static_cast<uint8_t>(bytes[i + 1]) << 8 |
                       static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < bytes.size()) {
    const bool two = i + 1 < bytes.size();
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16 | (two ? static_cast<uint8_t>(bytes[i + 1]) << 8 : 0);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += two ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text, std::string* problem) {
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t group = 0;  // the sextets of the current 4-character group
  int in_group = 0;
  int padding = 0;     // '=' seen; only more '=' and whitespace may follow
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (is_ascii_space(c)) continue;
    if (c == '=') {
      if (in_group < 2) return fail(problem, "misplaced '=' padding at byte " + std::to_string(i));
      ++padding;
      ++in_group;
    } else {
      const int v = sextet(c);
      if (v < 0) return fail(problem, "byte " + std::to_string(i) + " (0x" + "0123456789abcdef"[c >> 4] +
                                          "0123456789abcdef"[c & 15] + ") is not base64");
      if (padding > 0) return fail(problem, "data after '=' padding at byte " + std::to_string(i));
      group = group << 6 | static_cast<uint32_t>(v);
      ++in_group;
    }
    if (in_group < 4) continue;
    group <<= 6 * padding;  // the padded sextets count as zeros
    out += static_cast<char>(group >> 16);
    if (padding < 2) out += static_cast<char>((group >> 8) & 0xFF);
    if (padding < 1) out += static_cast<char>(group & 0xFF);
    group = 0;
    in_group = 0;
    if (padding > 0) padding = 3;  // the group that ended the data: nothing but whitespace may follow
  }
  if (in_group != 0) return fail(problem, "its length is not a multiple of 4 (cut short?)");
  return out;
}

}  // namespace tsarchive
