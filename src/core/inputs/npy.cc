// NumPy .npy files (numpy/lib/format.py, "NEP 1").
//
//   "\x93NUMPY"  major u8  minor u8      major 1: header length u16 LE
//                                        major 2, 3: header length u32 LE
//   header       a Python dict literal, padded with spaces and ended by '\n',
//                e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//                ASCII in 1.0 and 2.0, UTF-8 in 3.0 (only for field names of
//                structured dtypes, which we refuse anyway)
//   data         shape x itemsize bytes, C order or Fortran order, nothing after
// descr is byte order ('<' little, '>' big, '|' not applicable, '=' native,
// which numpy never writes: we read it as little-endian) + kind + item size.
// Supported: b1 i1 u1 i2 i4 i8 f2 f4 f8 c8 c16. Refused, by name: u2 u4 u8 (no
// torch dtype), object, strings, datetimes, void and structured dtypes (a list
// descr). The header is parsed as data, never evaluated: only string, True,
// False and tuples of non-negative integers are accepted as values.
// Writers pad the whole preamble to a multiple of 64 bytes; we do not demand it.
#include <cstring>

#include "base/error.h"
#include "contract/host_value.h"
#include "core/inputs/input_values.h"
#include "format/model.h"

namespace tsarchive {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr uint64_t kMaxHeader = 1 << 20;  // numpy itself refuses headers over 10 KB to read

struct NpyType {
  const char* code;  // kind + size, as in descr
  const char* dtype;
  size_t size;
};

constexpr NpyType kNpyTypes[] = {
    {"b1", "bool", 1},     {"i1", "int8", 1},     {"u1", "uint8", 1},        {"i2", "int16", 2},
    {"i4", "int32", 4},    {"i8", "int64", 8},    {"f2", "float16", 2},      {"f4", "float32", 4},
    {"f8", "float64", 8},  {"c8", "complex64", 8}, {"c16", "complex128", 16},
};

// The header dict, parsed strictly.
struct NpyHeader {
  std::string descr;
  bool descr_is_list = false;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  bool has_descr = false, has_order = false, has_shape = false;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& file) : text_(text), file_(file) {}

  NpyHeader parse() {
    NpyHeader h;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = string();
      expect(':');
      if (key == "descr") {
        skip_space();
        if (peek() == '[') {
          h.descr_is_list = true;
          return h;  // structured: refused by the caller; no need to read on
        }
        h.descr = string();
        h.has_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        h.has_order = true;
      } else if (key == "shape") {
        h.shape = shape();
        h.has_shape = true;
      } else {
        fail("unknown key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_space();
      if (peek() != '}') fail("expected ',' or '}'");
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the dict");
    if (!h.has_descr || !h.has_order || !h.has_shape) fail("a key is missing (descr, fortran_order, shape)");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw_bad_input("invalid .npy header at column " + std::to_string(pos_) + ": " + why, file_,
                    "the file is damaged or was not written by numpy.save");
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t')) ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a string");
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    if (s.find('\\') != std::string::npos) fail("escapes in strings are not supported");
    pos_ = end + 1;
    return s;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    fail("expected True or False");
  }
  std::vector<int64_t> shape() {
    expect('(');
    std::vector<int64_t> dims;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') fail("expected a non-negative dimension");
      uint64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (mul_overflows(v, 10, &v) || add_overflows(v, static_cast<uint64_t>(peek() - '0'), &v) ||
            v > static_cast<uint64_t>(INT64_MAX)) {
          fail("a dimension does not fit in 64 bits");
        }
        ++pos_;
      }
      if (dims.size() >= 64) fail("more than 64 dimensions");
      dims.push_back(static_cast<int64_t>(v));
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != ')') {
        fail("expected ',' or ')' in the shape");
      }
    }
    ++pos_;
    return dims;
  }

  std::string_view text_;
  size_t pos_ = 0;
  const std::string& file_;
};

// The dtype for a descr, or an error naming what the file holds.
const NpyType& npy_type(const std::string& descr, bool* big_endian, const std::string& file) {
  const std::string what = "the .npy file holds dtype '" + descr + "'";
  if (descr.size() < 2 || std::string_view("<>|=").find(descr[0]) == std::string_view::npos) {
    throw_bad_input(what + ", which is not a NumPy type string", file, "the file is damaged");
  }
  *big_endian = descr[0] == '>';
  const std::string code = descr.substr(1);
  for (const NpyType& t : kNpyTypes) {
    if (code == t.code) return t;
  }
  const char kind = code[0];
  if (code == "u2" || code == "u4" || code == "u8") {
    throw_bad_input(what + " (uint" + std::to_string(8 * (code[1] - '0')) + "), which has no torch dtype", file,
                    "convert it in NumPy first, e.g. a.astype(numpy.int64)");
  }
  const char* name = kind == 'O'                 ? "Python objects"
                     : kind == 'U' || kind == 'S' ? "strings"
                     : kind == 'M' || kind == 'm' ? "datetimes"
                     : kind == 'V'                ? "raw or structured records"
                                                  : "a type torch does not have";
  throw_bad_input(what + " (" + name + "), which cannot be a tensor", file,
                  "save a numeric array: bool, int8-64, uint8, float16-64, complex64 or complex128");
}

}  // namespace

void swap_elements(std::string& bytes, size_t width) {
  if (width < 2) return;
  for (size_t i = 0; i + width <= bytes.size(); i += width) {
    for (size_t a = i, b = i + width - 1; a < b; ++a, --b) std::swap(bytes[a], bytes[b]);
  }
}

namespace {

// Elements in C order one after another (dims of size 1 may have any stride).
bool c_contiguous(const HostTensor& t) {
  int64_t expected = 1;
  for (size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] != 1 && t.stride[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

std::string shape_literal(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

}  // namespace

namespace {

// The preamble (magic, version, header length) and the header text it
// frames; `data_start` is where the array's bytes begin.
std::string read_npy_header(const ByteSource& source, uint64_t& data_start) {
  const std::string& file = source.name();
  const uint64_t preamble_max = kMagicSize + 2 + 4;
  const std::string head = source.read_string(0, static_cast<size_t>(std::min<uint64_t>(preamble_max, source.size())));
  ByteReader r(head, ".npy preamble");
  if (head.size() < kMagicSize + 2 || std::memcmp(head.data(), kMagic, kMagicSize) != 0) {
    throw_bad_input("not a .npy file (no \\x93NUMPY magic)", file, "save the input with numpy.save");
  }
  r.skip(kMagicSize);
  const uint8_t major = r.u8();
  r.u8();  // minor: 0 in every version so far
  if (major < 1 || major > 3) {
    throw_bad_input(".npy format version " + std::to_string(major) + " is not supported (1, 2 and 3 are)", file,
                    "save it with numpy.save");
  }
  uint64_t header_length = 0;
  try {
    header_length = major == 1 ? r.u16() : r.u32();
  } catch (const Error&) {
    throw_bad_input("the .npy file ends inside its preamble", file, "the file is truncated");
  }
  const uint64_t header_start = r.offset();
  if (add_overflows(header_start, header_length, &data_start) || data_start > source.size()) {
    throw_bad_input("the .npy header claims " + std::to_string(header_length) + " bytes, past the end of the file (" +
                        std::to_string(source.size()) + " bytes)",
                    file, "the file is truncated or damaged");
  }
  if (header_length > kMaxHeader) {
    throw_bad_input("the .npy header claims " + std::to_string(header_length) + " bytes, an implausible size", file,
                    "the file is damaged");
  }
  std::string header = source.read_string(header_start, static_cast<size_t>(header_length));
  if (header.empty() || header.back() != '\n') {
    throw_bad_input("the .npy header does not end with a newline", file, "the file is damaged or truncated");
  }
  return header;
}

// Strides: C order has the last dim fastest; Fortran order the first. Dims
// of 0 count as 1, like torch; with one, the others can overflow.
void set_npy_strides(HostTensor& t, bool fortran_order, const std::string& file) {
  const size_t rank = t.shape.size();
  bool overflow = false;
  auto step = [&](int64_t stride, int64_t dim) {
    int64_t next = 0;
    overflow |= __builtin_mul_overflow(stride, std::max<int64_t>(dim, 1), &next);
    return next;
  };
  if (fortran_order) {
    for (size_t i = 1; i < rank; ++i) t.stride[i] = step(t.stride[i - 1], t.shape[i - 1]);
  } else {
    for (size_t i = rank; i-- > 1;) t.stride[i - 1] = step(t.stride[i], t.shape[i]);
  }
  if (overflow) {
    throw_bad_input("the .npy shape " + shape_literal(t.shape) + " is too large for 64-bit strides", file,
                    "the header is damaged");
  }
}

}  // namespace

HostTensor read_npy(const ByteSource& source) {
  InputBudget budget;
  return read_npy(source, budget);
}

HostTensor read_npy(const ByteSource& source, InputBudget& budget) {
  const std::string& file = source.name();
  uint64_t data_start = 0;
  const std::string header = read_npy_header(source, data_start);
  const NpyHeader h = HeaderParser(header, file).parse();
  if (h.descr_is_list) {
    throw_bad_input("the .npy file holds a structured dtype (named fields), which cannot be a tensor", file,
                    "save each field as its own array");
  }
  bool big_endian = false;
  const NpyType& type = npy_type(h.descr, &big_endian, file);

  HostTensor t;
  t.dtype = type.dtype;
  t.shape = h.shape;
  t.stride.assign(t.shape.size(), 1);
  uint64_t numel = 1;
  for (int64_t dim : t.shape) {
    if (mul_overflows(numel, static_cast<uint64_t>(dim), &numel)) {
      throw_bad_input("the .npy shape " + shape_literal(t.shape) + " has more elements than 64 bits count", file,
                      "the header is damaged");
    }
  }
  uint64_t nbytes = 0;
  const uint64_t actual = source.size() - data_start;
  const bool too_many = mul_overflows(numel, type.size, &nbytes);
  if (too_many || nbytes != actual) {
    throw_bad_input("the .npy header declares shape " + shape_literal(t.shape) + " of " + h.descr + " (" +
                        (too_many ? std::string("more than 2^64") : std::to_string(nbytes)) +
                        " bytes of data), but " + std::to_string(actual) + " bytes follow it",
                    file, "the file is truncated or its header is wrong");
  }
  set_npy_strides(t, h.fortran_order, file);
  budget.take(nbytes, "the .npy file's data", file);
  std::string data = source.read_string(data_start, static_cast<size_t>(nbytes));
  if (big_endian && type.size > 1) {
    // Complex numbers are two floats, each swapped on its own.
    const bool complex = type.code[0] == 'c';
    swap_elements(data, complex ? type.size / 2 : type.size);
  }
  t.bytes = std::make_shared<const std::string>(std::move(data));
  return t;
}

std::string write_npy(const HostTensor& tensor) {
  static const std::pair<const char*, const char*> kDescr[] = {
      {"bool", "|b1"},     {"int8", "|i1"},    {"uint8", "|u1"},     {"int16", "<i2"},
      {"int32", "<i4"},    {"int64", "<i8"},   {"float16", "<f2"},   {"float32", "<f4"},
      {"float64", "<f8"},  {"complex64", "<c8"}, {"complex128", "<c16"},
  };
  const char* descr = nullptr;
  for (const auto& [dtype, d] : kDescr) {
    if (tensor.dtype == dtype) descr = d;
  }
  if (descr == nullptr) {
    throw_usage("a " + tensor.dtype + " tensor cannot be written as .npy: NumPy has no such dtype",
                "save it as .pt instead (torch.save format)");
  }
  uint64_t element_size = 0;
  dtype_element_size(tensor.dtype, &element_size);
  uint64_t numel = 0;
  uint64_t end = 0;
  uint64_t end_bytes = 0;
  const uint64_t have = tensor.bytes ? tensor.bytes->size() : 0;
  if (!tensor_extent(tensor.shape, tensor.stride, tensor.offset, &numel, &end) ||
      mul_overflows(end, element_size, &end_bytes) || end_bytes > have) {
    throw_bad_input("a " + tensor.dtype + " tensor's view reaches past its " + std::to_string(have) + " bytes", {},
                    "this is a bug in the code that made the tensor");
  }
  // Broadcast views (stride 0) can have far more elements than bytes; the
  // file would be read back as an input, so the input bound applies.
  uint64_t data_bytes = 0;
  if (mul_overflows(numel, element_size, &data_bytes) || data_bytes > kMaxInputFileBytes) {
    throw_bad_input("a " + tensor.dtype + " tensor of " + std::to_string(numel) +
                        " elements is too large for a .npy file (more than 4 GiB)",
                    {}, "save a smaller tensor");
  }

  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " +
                       shape_literal(tensor.shape) + ", }";
  // Pad so that magic + version + length + header is a multiple of 64.
  const bool v2 = header.size() + 1 + kMagicSize + 4 > 65535;
  const size_t preamble = kMagicSize + 2 + (v2 ? 4 : 2);
  const size_t total = (preamble + header.size() + 1 + 63) / 64 * 64;
  header.append(total - preamble - header.size() - 1, ' ');
  header += '\n';

  std::string out(kMagic, kMagicSize);
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  out.reserve(out.size() + static_cast<size_t>(data_bytes));

  const char* base = tensor.bytes ? tensor.bytes->data() : nullptr;
  if (numel == 0) return out;  // (and below, every product of dims is at most numel)
  if (c_contiguous(tensor)) {  // most outputs: one copy
    out.append(base + static_cast<uint64_t>(tensor.offset) * element_size, data_bytes);
    return out;
  }
  // Visit elements in C order, carrying a multi-index like an odometer.
  const size_t rank = tensor.shape.size();
  std::vector<int64_t> index(rank, 0);
  for (uint64_t n = 0; n < numel; ++n) {
    int64_t element = tensor.offset;
    for (size_t d = 0; d < rank; ++d) element += index[d] * tensor.stride[d];
    out.append(base + static_cast<uint64_t>(element) * element_size, static_cast<size_t>(element_size));
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < tensor.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace tsarchive
