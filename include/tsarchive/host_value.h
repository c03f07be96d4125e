// Values that cross between the core and the torch layer for `tsarchive run`:
// the arguments a user gives (--input), the outputs a run is compared with
// (--expect), and the files both come from, as plain data. The core parses
// and reads them; the torch layer turns them into IValues by the method's
// schema. Nothing here includes libtorch.
//
// Input arguments (one --input each, in argument order):
//   SHAPE[:DTYPE[:FILL]]   a generated tensor, e.g. 1x3x224x224, 8x128:int64:zeros,
//                          2x3:float16:ones, 16:int64:range, scalar:float64 (0-dim)
//       SHAPE  dims joined by 'x' (0 allowed), or "scalar"
//       DTYPE  float32 (default) float64 float16 bfloat16 int64 int32 int16 int8
//              uint8 bool complex64 complex128 (aliases: float double half long int)
//       FILL   normal (default for floating and complex types), uniform [0,1),
//              zeros, ones, range (0, 1, 2, ... over the flattened tensor),
//              full=V, randint=LOW,HIGH (default for integer types: randint=0,10;
//              bool: random)
//   @FILE.npy              a NumPy array (.npy, any byte order, C or Fortran order)
//   @FILE.pt               torch.save of a tensor, or a list/tuple of tensors
//   json:TEXT              JSON: numbers, bools, strings, null, arrays, objects;
//                          a string that parses as SHAPE[:DTYPE[:FILL]] becomes a
//                          tensor where the schema wants a Tensor
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tsarchive/byte_source.h"

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

// SHAPE[:DTYPE[:FILL]]. Throws Error(Usage) naming what is wrong and the
// accepted forms.
TensorSpec parse_tensor_spec(std::string_view text);

// One --input argument: a spec, @FILE (.npy or .pt, chosen by content, not
// name) or json:TEXT. Files are read here; a file that cannot be read is
// Error(Io), one that is not a valid .npy/.pt is Error(BadInput).
HostValue parse_input_argument(const std::string& text);

// A .npy file (format 1.0, 2.0 or 3.0): header checked against the data
// (shape x element size must equal the bytes that follow), big-endian data
// swapped to little-endian, Fortran order expressed as strides.
// Error(BadInput) for anything else (object arrays, structured dtypes, a
// lying header), naming what was found.
HostTensor read_npy(const ByteSource& source);

// .npy (format 1.0; 2.0 when the header needs it) of a tensor, C order.
std::string write_npy(const HostTensor& tensor);

// A torch.save file (ZIP format): a tensor, or a list/tuple/dict (str keys)
// of tensors, nested. Tuples and lists come back as Kind::List with
// spreads = true at the top level. CRCs and storage sizes are checked.
// Error(BadInput) for anything else, saying what the file holds.
HostValue read_torch_save_value(const ByteSource& source);

}  // namespace tsarchive
