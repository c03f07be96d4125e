#include "format/tar.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "format/byte_source.h"

namespace tsarchive {

namespace {

constexpr uint64_t kBlock = 512;
constexpr uint64_t kMaxExtendedHeader = 64 * 1024;  // a GNU long name or PAX records

uint64_t round_up(uint64_t n) { return n % kBlock ? n - n % kBlock + kBlock : n; }

// tarfile's nts(): the bytes up to the first NUL.
std::string nts(const unsigned char* p, size_t n) {
  const void* nul = std::memchr(p, 0, n);
  return std::string(reinterpret_cast<const char*>(p), nul ? static_cast<const unsigned char*>(nul) - p : n);
}

// A number as tarfile's nti() reads it. `plain` is false for what tarfile's
// writer never makes (base-256, a sign, 0o, underscores, odd whitespace).
struct Number {
  bool valid = false;
  bool plain = true;
  bool fits = true;  // base-256 beyond 63 bits
  int64_t value = 0;
};

bool python_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

Number nti(const unsigned char* p, size_t n) {
  Number out;
  if (p[0] == 0x80 || p[0] == 0xff) {  // base-256 (GNU)
    out.valid = true;
    out.plain = false;
    uint64_t v = 0;
    for (size_t i = 1; i < n; ++i) {
      if (v >> 55) out.fits = false;
      v = (v << 8) | p[i];
    }
    if (v >> 63) out.fits = false;
    out.value = p[0] == 0xff ? -static_cast<int64_t>(v & 0x7fffffffffffffffull) : static_cast<int64_t>(v);
    return out;
  }
  std::string s = nts(p, n);
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return out;  // .decode("ascii") fails
  }
  // str.strip(), then int(s or "0", 8): a sign, 0o, digits with single underscores between.
  size_t b = 0, e = s.size();
  while (b < e && python_space(s[b])) ++b;
  while (e > b && python_space(s[e - 1])) --e;
  for (size_t i = 0; i < b; ++i) out.plain = out.plain && s[i] == ' ';
  for (size_t i = e; i < s.size(); ++i) out.plain = out.plain && s[i] == ' ';
  if (b == e) {
    out.valid = true;
    return out;
  }
  size_t i = b;
  bool negative = false;
  if (s[i] == '+' || s[i] == '-') {
    negative = s[i] == '-';
    out.plain = false;
    ++i;
  }
  bool after_prefix = false;
  if (e - i >= 2 && s[i] == '0' && (s[i + 1] == 'o' || s[i + 1] == 'O')) {
    out.plain = false;
    after_prefix = true;
    i += 2;
  }
  uint64_t v = 0;
  bool digit = false, underscore_ok = after_prefix;
  for (; i < e; ++i) {
    if (s[i] == '_') {
      if (!underscore_ok) return out;
      out.plain = false;
      underscore_ok = false;
      digit = false;
      continue;
    }
    if (s[i] < '0' || s[i] > '7') return out;
    if (v >> 60) out.fits = false;
    v = v * 8 + static_cast<uint64_t>(s[i] - '0');
    digit = true;
    underscore_ok = true;
  }
  if (!digit) return out;
  out.valid = true;
  out.value = negative ? -static_cast<int64_t>(v & 0x7fffffffffffffffull) : static_cast<int64_t>(v);
  return out;
}

// The numeric fields frombuf() reads; any that does not read makes the header invalid.
struct Field {
  size_t at, size;
};
constexpr Field kNumbers[] = {{100, 8}, {108, 8}, {116, 8}, {124, 12}, {136, 12}, {329, 8}, {337, 8}};
constexpr Field kSize{124, 12};

bool checksum_ok(const unsigned char* block, bool* plain) {
  const Number stated = nti(block + 148, 8);
  if (!stated.valid) return false;
  *plain = *plain && stated.plain;
  int64_t unsigned_sum = 256, signed_sum = 256;
  for (size_t i = 0; i < kBlock; ++i) {
    if (i >= 148 && i < 156) continue;
    unsigned_sum += block[i];
    signed_sum += static_cast<signed char>(block[i]);
  }
  return stated.value == unsigned_sum || stated.value == signed_sum;
}

struct Header {
  bool valid = false;
  bool plain = true;
  std::string name, linkname;
  char type = '0';
  Number size;
};

Header parse_header(const unsigned char* block) {
  Header h;
  if (std::all_of(block, block + kBlock, [](unsigned char c) { return c == 0; })) return h;
  if (!checksum_ok(block, &h.plain)) return h;
  for (const Field& f : kNumbers) {
    const Number n = nti(block + f.at, f.size);
    if (!n.valid) return h;
    h.plain = h.plain && n.plain;
  }
  h.size = nti(block + kSize.at, kSize.size);
  h.valid = true;
  h.type = static_cast<char>(block[156]);
  h.name = nts(block, 100);
  h.linkname = nts(block + 157, 100);
  const std::string prefix = nts(block + 345, 155);
  if (h.type == '\0' && !h.name.empty() && h.name.back() == '/') h.type = '5';  // an old directory
  if (h.type == '5') {
    while (!h.name.empty() && h.name.back() == '/') h.name.pop_back();
  }
  if (!prefix.empty() && h.type != 'L' && h.type != 'K' && h.type != 'S') h.name = prefix + "/" + h.name;
  return h;
}


// PAX records "LEN KEY=VALUE\n", read as _proc_pax's regex reads them. False
// when a record states length 0 (tarfile: an invalid header).
bool parse_pax(const std::string& data, std::map<std::string, std::string>& into) {
  size_t pos = 0;
  while (pos < data.size()) {
    size_t i = pos;
    uint64_t length = 0;
    while (i < data.size() && data[i] >= '0' && data[i] <= '9' && length < (1ull << 40)) {
      length = length * 10 + static_cast<uint64_t>(data[i] - '0');
      ++i;
    }
    if (i == pos || i >= data.size() || data[i] != ' ') break;
    const size_t key_at = i + 1;
    const size_t eq = data.find('=', key_at);
    if (eq == std::string::npos || eq == key_at) break;
    if (length == 0) return false;
    const size_t value_end = std::min<uint64_t>(pos + length - 1, data.size());
    const std::string value = eq + 1 < value_end ? data.substr(eq + 1, value_end - eq - 1) : std::string();
    into[data.substr(key_at, eq - key_at)] = value;
    pos += static_cast<size_t>(std::min<uint64_t>(length, data.size() - pos));
  }
  return true;
}

// _apply_pax_info: path (trailing slashes dropped), linkpath, size.
void apply_pax(const std::map<std::string, std::string>& pax, TarMember& m) {
  for (const auto& [key, value] : pax) {
    if (key == "path" || key == "GNU.sparse.name") {
      m.name = value;
      while (!m.name.empty() && m.name.back() == '/') m.name.pop_back();
    } else if (key == "linkpath") {
      m.linkname = value;
    } else if (key == "size" || key == "GNU.sparse.size") {
      uint64_t v = 0;
      bool ok = !value.empty() && value.size() <= 18;
      for (char c : value) ok = ok && c >= '0' && c <= '9';
      for (char c : value) v = ok ? v * 10 + static_cast<uint64_t>(c - '0') : 0;
      m.size = v;  // int(value), 0 when it does not read
    }
  }
}

std::string at_offset(uint64_t offset) { return " (offset " + std::to_string(offset) + ")"; }

// The list ends at a zero block, a short one or an invalid header. torch.save's
// writer put only zeros after it (tarfile pads the file to 10 KiB): bytes
// there are hidden from tarfile, and not from readers that skip zero blocks.
void note_hidden_tail(const ByteSource& source, uint64_t end, TarListing& out) {
  constexpr uint64_t kMaxTail = 64 * 1024;
  const uint64_t size = source.size();
  const std::string tail = source.read_string(end, static_cast<size_t>(std::min(size - end, kMaxTail)));
  const bool zeros = std::all_of(tail.begin(), tail.end(), [](char c) { return c == 0; });
  if (zeros && size - end <= kMaxTail) return;
  out.anomalies.push_back(std::to_string(size - end) + " bytes after the end of the member list that are not " +
                          "zeros: tarfile stops there, readers that read on see more" + at_offset(end));
}

}  // namespace

bool tar_type_supported(char type) { return type == '\0' || std::memchr("01234567LKSxgX", type, 14) != nullptr; }

std::string tar_type_name(char type) {
  switch (type) {
    case '\0':
    case '0':
      return "file";
    case '1':
      return "hard link";
    case '2':
      return "symbolic link";
    case '3':
      return "character device";
    case '4':
      return "block device";
    case '5':
      return "directory";
    case '6':
      return "FIFO";
    case '7':
      return "contiguous file";
    case 'S':
      return "GNU sparse file";
    default:
      return "member of type '" + std::string(1, type) + "'";
  }
}

bool is_tar_header(const unsigned char* block) { return parse_header(block).valid; }

std::optional<TarListing> list_tar(const ByteSource& source, size_t max_members) {
  const uint64_t size = source.size();
  TarListing out;
  std::map<std::string, std::string> global_pax;
  uint64_t offset = 0;
  uint64_t position = 0;  // where tarfile's file object stands: past the last byte it read
  unsigned char block[kBlock];
  while (true) {
    // next(): a member's data that runs past the end is an error, found when the next one is asked for.
    if (offset != position && offset > size) {
      out.read_error = "the data of '" + out.members.back().name + "' runs past the end of the file";
      return out;
    }
    if (out.members.size() >= max_members) {
      out.anomalies.push_back("more than " + std::to_string(max_members) + " members; the rest are not read" +
                              at_offset(offset));
      return out;
    }
    TarMember m;
    std::map<std::string, std::string> local_pax;
    std::optional<std::string> long_name, long_link;
    bool subsequent = false;  // a header that an extended header announced
    uint64_t header_at = offset;
    Header h;
    while (true) {
      if (size - std::min(size, header_at) < kBlock) {
        h = Header{};
      } else {
        source.read_at(header_at, block, kBlock);
        position = header_at + kBlock;
        h = parse_header(block);
      }
      if (!h.valid) {
        if (header_at == 0) return std::nullopt;
        if (subsequent) {
          out.read_error = "an extended header is not followed by a valid header" + at_offset(header_at);
        } else {
          note_hidden_tail(source, header_at, out);
        }
        return out;  // a zero, short or invalid block ends the list
      }
      if (!h.plain) out.anomalies.push_back("a header whose numbers torch.save's writer never spells so" + at_offset(header_at));
      if (!h.size.fits || h.size.value < 0) {
        out.anomalies.push_back("a member size tarfile reads as " + std::string(h.size.fits ? "negative" : "beyond 2^63") +
                                "; the rest is not read" + at_offset(header_at));
        return out;
      }
      const char t = h.type;
      if (t == 'L' || t == 'K' || t == 'x' || t == 'X' || t == 'g') {
        const uint64_t data_size = static_cast<uint64_t>(h.size.value);
        out.anomalies.push_back(std::string(t == 'L' || t == 'K' ? "a GNU long-name header" : "a PAX extended header") +
                                ", which torch.save's tar writer never wrote" + at_offset(header_at));
        if (data_size > kMaxExtendedHeader) {
          out.anomalies.push_back("an extended header of " + std::to_string(data_size) +
                                  " bytes; the rest is not read" + at_offset(header_at));
          return out;
        }
        const uint64_t data_at = header_at + kBlock;
        const uint64_t readable = std::min(round_up(data_size), size - std::min(size, data_at));
        std::string data = source.read_string(data_at, static_cast<size_t>(readable));
        position = data_at + readable;
        // Stacked extended headers: tarfile applies the inner one first, so the outer one wins.
        const auto text = [&data] { return nts(reinterpret_cast<const unsigned char*>(data.data()), data.size()); };
        if (t == 'L' && !long_name) long_name = text();
        if (t == 'K' && !long_link) long_link = text();
        if (t == 'x' || t == 'X' || t == 'g') {
          std::map<std::string, std::string> records;
          if (!parse_pax(data, records)) {
            if (header_at == 0) return std::nullopt;
            return out;  // an invalid header ends the list
          }
          if (t == 'g') {
            for (auto& [key, value] : records) global_pax[key] = value;
          } else {
            local_pax.insert(records.begin(), records.end());  // keeps what an outer header set
          }
        }
        header_at = data_at + round_up(data_size);
        subsequent = true;
        continue;
      }
      if (t == 'S') {
        out.anomalies.push_back("a GNU sparse member, which tsarchive does not follow; the rest is not read" +
                                at_offset(header_at));
        return out;
      }
      break;
    }
    if (!tar_type_supported(h.type)) {
      out.anomalies.push_back("a member of unknown type '" + std::string(1, h.type) +
                              "', which tarfile reads as a file" + at_offset(header_at));
    }
    m.name = h.name;
    m.type = h.type;
    m.linkname = h.linkname;
    m.header_offset = header_at;
    m.data_offset = header_at + kBlock;
    m.size = static_cast<uint64_t>(h.size.value);
    const bool skips_data = m.read_as_file();
    offset = m.data_offset + (skips_data ? round_up(m.size) : 0);
    apply_pax(global_pax, m);  // _proc_builtin: after the offset is set
    if (!local_pax.empty()) {
      apply_pax(local_pax, m);
      if (local_pax.count("size") || local_pax.count("GNU.sparse.size")) {
        offset = m.data_offset + (skips_data ? round_up(m.size) : 0);
      }
    }
    if (long_name) {
      m.name = *long_name;
      if (m.type == '5') {
        while (!m.name.empty() && m.name.back() == '/') m.name.pop_back();
      }
    }
    if (long_link) m.linkname = *long_link;
    out.members.push_back(std::move(m));
  }
}

}  // namespace tsarchive
