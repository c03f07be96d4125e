// Element-by-element comparison of two tensors, read from their storages.
//
// A tensor (TensorInfo, model.h) is `shape` elements of `dtype` at storage
// element  storage_offset + sum_i index[i] * stride[i]  of a storage record
// holding raw little-endian elements. Two tensors of one dtype and shape are
// compared by logical index, so a contiguous tensor equals a transposed
// copy of itself that holds the same values.
//
// Values: float32, float64, float16, bfloat16, float8 (e4m3fn, e5m2) and the
// complex types are decoded to double; integer types and bool to int64, so
// differences are exact. Two elements are equal when their values are:
// +0 equals -0, and NaN equals NaN (a file must compare equal to itself).
// The max abs difference is taken over finite differences (|a - b|, the
// modulus for complex); an element that differs where a side is NaN or
// infinite is counted in `nonfinite` instead. Quantized tensors (qint8,
// quint8, qint32) compare their integer representations and report only how
// many differ, since their scale and zero point live in data.pkl; packed
// sub-byte types (quint4x2, quint2x4) are not compared.
//
// Reading is bounded. Elements are visited in the order of the old tensor's
// strides, so a side laid out that way streams through a 1 MiB window. A side
// whose visits jump back (laid out differently, or overlapping itself) is
// read whole when its extent is at most kRandomAccessLimit, and is not
// compared otherwise; neither is a view with more elements than its storage
// span allows (kMaxOverlap), nor one that reaches past its storage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/byte_source.h"
#include "format/model.h"

namespace tsarchive {

struct TensorValueLimits {
  static constexpr uint64_t kWindow = 1ull << 20;
  static constexpr uint64_t kRandomAccessLimit = 64ull << 20;
  // A view may visit each element of its span this many times (plus 1 Mi
  // elements) before it is deemed too expensive: broadcasts saved with
  // stride 0 can claim 2^40 elements over one.
  static constexpr uint64_t kMaxOverlap = 4;
};

// The bytes of one storage record: read from the archive through a window
// that moves forward (stored records), or held in memory.
class StorageBytes {
 public:
  // `size` bytes of `source` starting at `offset` (a stored record's data).
  StorageBytes(const ByteSource& source, uint64_t offset, uint64_t size);
  explicit StorageBytes(std::string bytes);

  uint64_t size() const { return size_; }
  // Reads [begin, end) now and keeps it, so that any access inside it needs no read.
  void hold(uint64_t begin, uint64_t end);
  // `n` bytes at `offset`; offset + n must be <= size(). Valid until the next call.
  const unsigned char* at(uint64_t offset, size_t n);

 private:
  const ByteSource* source_ = nullptr;
  uint64_t base_ = 0;
  uint64_t size_ = 0;
  std::string window_;
  uint64_t window_begin_ = 0;
  bool held_ = false;
};

struct TensorValueDiff {
  bool compared = false;
  std::string note;            // why not compared, or what was compared (quantized)
  uint64_t elements = 0;
  uint64_t differing = 0;      // elements whose values differ
  uint64_t nonfinite = 0;      // ... of which a side is NaN or infinite
  std::optional<double> max_abs_diff;  // over finite differences; none if there are none, or quantized
  std::vector<int64_t> max_index;      // logical index of the first largest difference
  std::optional<double> old_value;     // values there (not for complex types)
  std::optional<double> new_value;
};

// Compares `old_tensor` in `old_storage` with `new_tensor` in `new_storage`.
// Both must have the same dtype and shape (the caller reports other changes).
TensorValueDiff compare_tensor_values(const TensorInfo& old_tensor, StorageBytes& old_storage,
                                      const TensorInfo& new_tensor, StorageBytes& new_storage);

// Decoders of the 16- and 8-bit float formats (IEEE binary16; bfloat16, the
// top half of a binary32; float8 e4m3fn without infinities, and e5m2).
double half_to_double(uint16_t bits);
double bfloat16_to_double(uint16_t bits);
double float8_e4m3fn_to_double(uint8_t bits);
double float8_e5m2_to_double(uint8_t bits);

}  // namespace tsarchive
