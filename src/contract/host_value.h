// Values that cross between the core and the torch layer for `tsarchive run`:
// the arguments a user gives (--input) and the outputs a run is compared with
// (--expect), as plain data. The core parses and reads them
// (core/inputs/input_values.h); the torch layer turns them into IValues by the
// method's schema. Nothing here includes libtorch.

#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tsarchive {

// A tensor as bytes: `shape` elements of `dtype` at element
// offset + sum_i index[i] * stride[i] of `bytes` (little-endian elements).
// The dtype names are those of model.h ("float32", "int64", "bool", ...).
struct HostTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;  // in elements
  int64_t offset = 0;           // in elements
  std::shared_ptr<const std::string> bytes;
};

enum class TensorFill { Normal, Uniform, Zeros, Ones, Range, Full, RandInt };

// A tensor to generate (seeded): SHAPE[:DTYPE[:FILL]].
struct TensorSpec {
  std::vector<int64_t> shape;
  std::string dtype = "float32";
  TensorFill fill = TensorFill::Normal;
  double full_value = 0;          // Full
  int64_t low = 0, high = 10;     // RandInt: [low, high)
  std::string text;               // as written, for messages and reports
};

// A value given on the command line or read from a file.
struct HostValue {
  enum class Kind { None, Bool, Int, Float, String, List, Dict, Spec, Tensor };
  Kind kind = Kind::None;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string string;                                    // String
  std::vector<HostValue> items;                          // List (JSON arrays, tuples, lists)
  std::vector<std::pair<std::string, HostValue>> entries;  // Dict (JSON objects; torch.save str keys)
  TensorSpec spec;                                       // Spec
  HostTensor tensor;                                     // Tensor
  // A list or tuple read from a file (@x.pt): supplies several consecutive
  // arguments unless the parameter at its position is itself a list or tuple.
  bool spreads = false;
  bool tuple = false;  // a List read from a Python tuple (torch.save, --save-inputs' argument tuple)
  std::string origin;                                    // "--input 2", "@x.npy": for messages
};

// Input files (@FILE) are read into memory whole, so larger ones are refused
// before reading: 4 GiB is far above any model input one would type a path
// for, and small enough that a mistaken path (a disk image) fails at once.
constexpr uint64_t kMaxInputFileBytes = 4ull << 30;

}  // namespace tsarchive
