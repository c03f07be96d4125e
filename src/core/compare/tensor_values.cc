// Tensor values compared element by element (the rules are in tensor_values.h).
#include "core/compare/tensor_values.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <numeric>

#include "base/error.h"

namespace tsarchive {

StorageBytes::StorageBytes(const ByteSource& source, uint64_t offset, uint64_t size)
    : source_(&source), base_(offset), size_(size) {}

StorageBytes::StorageBytes(std::string bytes) : size_(bytes.size()), window_(std::move(bytes)), held_(true) {}

void StorageBytes::hold(uint64_t begin, uint64_t end) {
  if (source_ == nullptr) return;  // all in memory already
  window_ = source_->read_string(base_ + begin, static_cast<size_t>(end - begin));
  window_begin_ = begin;
  held_ = true;
}

const unsigned char* StorageBytes::at(uint64_t offset, size_t n) {
  if (offset < window_begin_ || offset + n > window_begin_ + window_.size()) {
    if (held_ || offset + n > size_) {
      throw Error(ErrorKind::BadInput, "internal error: storage read at " + std::to_string(offset) + " outside " +
                                           std::to_string(size_) + " bytes");
    }
    const uint64_t length = std::max<uint64_t>(n, std::min(TensorValueLimits::kWindow, size_ - offset));
    window_ = source_->read_string(base_ + offset, static_cast<size_t>(length));
    window_begin_ = offset;
  }
  return reinterpret_cast<const unsigned char*>(window_.data()) + (offset - window_begin_);
}

namespace {

template <typename T>
T load_le(const unsigned char* p) {
  uint64_t bits = 0;
  for (size_t i = sizeof(T); i-- > 0;) bits = (bits << 8) | p[i];
  T value;
  if constexpr (sizeof(T) == 8) {
    std::memcpy(&value, &bits, 8);
  } else {
    using U = std::conditional_t<sizeof(T) == 4, uint32_t, std::conditional_t<sizeof(T) == 2, uint16_t, uint8_t>>;
    const U narrow = static_cast<U>(bits);
    std::memcpy(&value, &narrow, sizeof(T));
  }
  return value;
}

// Element comparison per value type: equality, |a - b|, and whether that is finite.
bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }
bool same(int64_t a, int64_t b) { return a == b; }
bool same(std::complex<double> a, std::complex<double> b) { return same(a.real(), b.real()) && same(a.imag(), b.imag()); }

double distance(double a, double b) { return std::fabs(a - b); }
double distance(int64_t a, int64_t b) {
  const uint64_t d = a > b ? static_cast<uint64_t>(a) - static_cast<uint64_t>(b)
                           : static_cast<uint64_t>(b) - static_cast<uint64_t>(a);
  return static_cast<double>(d);
}
double distance(std::complex<double> a, std::complex<double> b) { return std::abs(a - b); }

std::optional<double> shown(double v) { return v; }
std::optional<double> shown(int64_t v) { return static_cast<double>(v); }
std::optional<double> shown(std::complex<double>) { return std::nullopt; }

struct Walk {
  std::vector<size_t> order;  // dims with more than one element, outermost first
  uint64_t elements = 0;
};

// Visit order: by the old tensor's strides, largest first, so it streams.
Walk walk_order(const TensorInfo& t) {
  Walk w;
  w.elements = 1;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (mul_overflows(w.elements, static_cast<uint64_t>(t.shape[d]), &w.elements)) w.elements = UINT64_MAX;
    if (t.shape[d] > 1) w.order.push_back(d);
  }
  std::stable_sort(w.order.begin(), w.order.end(), [&](size_t x, size_t y) { return t.stride[x] > t.stride[y]; });
  return w;
}

// Positions visited in `order` increase strictly when each stride exceeds
// the span of the dims inside it.
bool streams(const TensorInfo& t, const std::vector<size_t>& order) {
  uint64_t inner_span = 0;
  for (size_t i = order.size(); i-- > 0;) {
    const size_t d = order[i];
    const uint64_t stride = static_cast<uint64_t>(t.stride[d]);
    if (stride <= inner_span) return false;
    inner_span += (static_cast<uint64_t>(t.shape[d]) - 1) * stride;
  }
  return true;
}

// Checks that one side can be read within bounds and prepares its storage;
// returns why not when it cannot.
std::optional<std::string> prepare(const TensorInfo& t, uint64_t element_size, uint64_t elements,
                                   const std::vector<size_t>& order, StorageBytes& storage, const char* side) {
  uint64_t last = static_cast<uint64_t>(t.storage_offset);
  bool overflow = false;
  for (size_t d : order) {
    uint64_t step = 0;
    overflow |= mul_overflows(static_cast<uint64_t>(t.shape[d]) - 1, static_cast<uint64_t>(t.stride[d]), &step);
    overflow |= add_overflows(last, step, &last);
  }
  uint64_t end_bytes = 0;
  if (overflow || mul_overflows(last + 1, element_size, &end_bytes) || end_bytes > storage.size()) {
    return std::string("the ") + side + " tensor reaches past its storage record";
  }
  const uint64_t span = last - static_cast<uint64_t>(t.storage_offset) + 1;
  if (elements > span * TensorValueLimits::kMaxOverlap + (1u << 20)) {
    return std::string("the ") + side + " tensor views its storage with " + std::to_string(elements) +
           " elements over a span of " + std::to_string(span) + "; too many repeats to compare";
  }
  if (!streams(t, order)) {
    const uint64_t begin = static_cast<uint64_t>(t.storage_offset) * element_size;
    if (end_bytes - begin > TensorValueLimits::kRandomAccessLimit) {
      return std::string("the ") + side + " tensor is laid out differently and spans " + std::to_string(end_bytes - begin) +
             " bytes, more than the " + std::to_string(TensorValueLimits::kRandomAccessLimit >> 20) +
             " MiB read whole for out-of-order access";
    }
    storage.hold(begin, end_bytes);
  }
  return std::nullopt;
}

template <typename Decode>
void compare_elements(const TensorInfo& a, StorageBytes& sa, const TensorInfo& b, StorageBytes& sb, size_t element_size,
                      const Walk& walk, Decode decode, TensorValueDiff& out) {
  std::vector<int64_t> index(a.shape.size(), 0);
  uint64_t pa = static_cast<uint64_t>(a.storage_offset), pb = static_cast<uint64_t>(b.storage_offset);
  double max = -1;
  for (uint64_t e = 0; e < walk.elements; ++e) {
    const auto va = decode(sa.at(pa * element_size, element_size));
    const auto vb = decode(sb.at(pb * element_size, element_size));
    if (!same(va, vb)) {
      ++out.differing;
      const double d = distance(va, vb);
      if (!std::isfinite(d)) {
        ++out.nonfinite;
      } else if (d > max) {
        max = d;
        out.max_abs_diff = d;
        out.max_index = index;
        out.old_value = shown(va);
        out.new_value = shown(vb);
      }
    }
    for (size_t i = walk.order.size(); i-- > 0;) {  // next index, innermost dim first
      const size_t d = walk.order[i];
      if (++index[d] < a.shape[d]) {
        pa += static_cast<uint64_t>(a.stride[d]);
        pb += static_cast<uint64_t>(b.stride[d]);
        break;
      }
      index[d] = 0;
      pa -= static_cast<uint64_t>(a.shape[d] - 1) * static_cast<uint64_t>(a.stride[d]);
      pb -= static_cast<uint64_t>(b.shape[d] - 1) * static_cast<uint64_t>(b.stride[d]);
    }
  }
}

}  // namespace

double half_to_double(uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  double v;
  if (exponent == 0) v = std::ldexp(mantissa, -24);
  else if (exponent == 31) v = mantissa == 0 ? INFINITY : NAN;
  else v = std::ldexp(mantissa + 1024, exponent - 25);
  return sign ? -v : v;
}

double bfloat16_to_double(uint16_t bits) {
  const uint32_t wide = uint32_t{bits} << 16;
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

double float8_e4m3fn_to_double(uint8_t bits) {
  const int sign = bits >> 7, exponent = (bits >> 3) & 0xf, mantissa = bits & 0x7;
  double v;
  if (exponent == 0xf && mantissa == 0x7) v = NAN;  // the only NaN; no infinities
  else if (exponent == 0) v = std::ldexp(mantissa, -9);
  else v = std::ldexp(mantissa + 8, exponent - 10);
  return sign ? -v : v;
}

double float8_e5m2_to_double(uint8_t bits) { return half_to_double(static_cast<uint16_t>(bits << 8)); }

TensorValueDiff compare_tensor_values(const TensorInfo& a, StorageBytes& sa, const TensorInfo& b, StorageBytes& sb) {
  TensorValueDiff out;
  uint64_t element_size = 0;
  auto negative = [](const std::vector<int64_t>& v) { return std::any_of(v.begin(), v.end(), [](int64_t x) { return x < 0; }); };
  if (a.dtype != b.dtype || a.shape != b.shape || a.stride.size() != a.shape.size() ||
      b.stride.size() != b.shape.size() || !dtype_element_size(a.dtype, &element_size) || negative(a.shape) ||
      negative(a.stride) || negative(b.stride) || a.storage_offset < 0 || b.storage_offset < 0) {
    out.note = "dtype or shape differ, the dtype is unknown, or the layout is malformed";
    return out;
  }
  const Walk walk = walk_order(a);
  out.elements = walk.elements;
  if (a.dtype == "quint4x2" || a.dtype == "quint2x4") {
    out.note = "packed " + a.dtype + " values are not compared";
    return out;
  }
  if (walk.elements == 0) {
    out.compared = true;
    return out;
  }
  for (auto [t, s, side] : {std::tuple{&a, &sa, "old"}, std::tuple{&b, &sb, "new"}}) {
    if (auto why = prepare(*t, element_size, walk.elements, walk.order, *s, side)) {
      out.note = *why;
      return out;
    }
  }
  const size_t es = static_cast<size_t>(element_size);
  auto run = [&](auto decode) { compare_elements(a, sa, b, sb, es, walk, decode, out); };
  using P = const unsigned char*;
  const std::string& t = a.dtype;
  if (t == "float32") run([](P p) { return double{load_le<float>(p)}; });
  else if (t == "float64") run([](P p) { return load_le<double>(p); });
  else if (t == "float16") run([](P p) { return half_to_double(load_le<uint16_t>(p)); });
  else if (t == "bfloat16") run([](P p) { return bfloat16_to_double(load_le<uint16_t>(p)); });
  else if (t == "float8_e4m3fn") run([](P p) { return float8_e4m3fn_to_double(p[0]); });
  else if (t == "float8_e5m2") run([](P p) { return float8_e5m2_to_double(p[0]); });
  else if (t == "complex32") run([](P p) { return std::complex<double>(half_to_double(load_le<uint16_t>(p)), half_to_double(load_le<uint16_t>(p + 2))); });
  else if (t == "complex64") run([](P p) { return std::complex<double>(load_le<float>(p), load_le<float>(p + 4)); });
  else if (t == "complex128") run([](P p) { return std::complex<double>(load_le<double>(p), load_le<double>(p + 8)); });
  else if (t == "int64") run([](P p) { return load_le<int64_t>(p); });
  else if (t == "int32" || t == "qint32") run([](P p) { return int64_t{load_le<int32_t>(p)}; });
  else if (t == "int16") run([](P p) { return int64_t{load_le<int16_t>(p)}; });
  else if (t == "int8" || t == "qint8") run([](P p) { return int64_t{static_cast<int8_t>(p[0])}; });
  else if (t == "uint8" || t == "quint8") run([](P p) { return int64_t{p[0]}; });
  else if (t == "bool") run([](P p) { return int64_t{p[0] != 0}; });
  else {
    out.note = "values of dtype " + t + " are not compared";
    return out;
  }
  out.compared = true;
  if (t[0] == 'q') {
    out.note = "quantized: integer representations compared; scale and zero point are in data.pkl";
    out.max_abs_diff.reset();
    out.max_index.clear();
    out.old_value.reset();
    out.new_value.reset();
  }
  return out;
}

}  // namespace tsarchive
