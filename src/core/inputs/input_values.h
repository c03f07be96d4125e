// Reading what users give `run`: --input arguments and the files they name
// (.npy, torch.save), into the plain values of contract/host_value.h.
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
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "contract/host_value.h"
#include "format/byte_source.h"

namespace tsarchive {

// What the tensors read from a command's input files (--input, --expect) may
// take in memory, all of them together. They are held whole in tsarchive and
// in libtorch's worker while the model runs, so their bound is a share of the
// worker's --memory-limit (operations/worker_settings.h: input_budget), and it
// is checked against what each file declares before its bytes are read or
// inflated: a .npy's data, a torch.save file's storage records (their
// uncompressed sizes: a 3 MB file whose storage deflates 1000:1 is 3 GB), a
// picture's tensor by its header. A torch.save file's views are bounded by it
// too: each tensor's elements, a broadcast dimension (stride 0) counted once,
// all of a file's together; the worker passes views over the storages as
// torch.load does and reads each element once for the Inputs table.
class InputBudget {
 public:
  // `limit` bytes, `source` says where the figure comes from ("half of
  // --memory-limit 4.0 GiB"), `hint` what the user can do past it.
  // `held`: what the budget is for, in messages ("inputs").
  explicit InputBudget(uint64_t limit = kMaxInputFileBytes, std::string source = "the limit for input files",
                       std::string hint = "give a smaller input", std::string held = "inputs");
  // Takes `bytes` for `what` ("the .npy file's data"), or throws
  // Error(BadInput) naming `file` when the inputs would pass the limit.
  void take(uint64_t bytes, const std::string& what, const std::string& file);
  // Error(BadInput) naming `file`: `what` comes to more than the limit.
  [[noreturn]] void refuse(const std::string& what, const std::string& file) const;
  uint64_t limit() const { return limit_; }
  uint64_t used() const { return used_; }

 private:
  uint64_t limit_;
  uint64_t used_ = 0;
  std::string source_;
  std::string hint_;
  std::string held_;
};

// SHAPE[:DTYPE[:FILL]]. Throws Error(Usage) naming what is wrong and the
// accepted forms.
TensorSpec parse_tensor_spec(std::string_view text);

// One --input argument: a spec, @FILE (.npy or .pt, chosen by content, not
// name) or json:TEXT. Files are read here, their tensors within `budget`; a
// file that cannot be read is Error(Io), one that is not a valid .npy/.pt, or
// whose tensors pass the budget, is Error(BadInput).
HostValue parse_input_argument(const std::string& text, InputBudget& budget);
HostValue parse_input_argument(const std::string& text);  // within a budget of its own: kMaxInputFileBytes

// A parsed JSON value as json:TEXT gives it: null, bools, numbers (integers
// stay Int), strings, arrays (List) and objects (Dict, in document order).
// The torch layer converts it by the parameter's type. Error(Usage) for an
// unsigned integer past int64 or binary values. `serve` converts request
// parameters with it, so they mean what `run --input json:` means.
// Objects keep their order only as an ordered_json (run's json: parses one);
// nlohmann::json has already sorted their keys.
HostValue host_value_of_json(const nlohmann::ordered_json& j);
HostValue host_value_of_json(const nlohmann::json& j);

// A .npy file (format 1.0, 2.0 or 3.0): header checked against the data
// (shape x element size must equal the bytes that follow), big-endian data
// swapped to little-endian, Fortran order expressed as strides.
// Error(BadInput) for anything else (object arrays, structured dtypes, a
// lying header), naming what was found.
HostTensor read_npy(const ByteSource& source, InputBudget& budget);
HostTensor read_npy(const ByteSource& source);

// .npy (format 1.0; 2.0 when the header needs it) of a tensor, C order.
std::string write_npy(const HostTensor& tensor);

// Reverses the bytes of every `width`-byte element: big-endian data to the
// little-endian elements of HostTensor (.npy '>' types, torch.save's byteorder "big").
void swap_elements(std::string& bytes, size_t width);

// A torch.save file (ZIP format): a tensor, or a list/tuple/dict (str keys)
// of tensors, nested. Tuples and lists come back as Kind::List with
// spreads = true at the top level. CRCs and storage sizes are checked; a
// file whose byteorder record says "big" has its elements swapped, as
// torch.load does, and one that says anything but little or big is refused.
// Error(BadInput) for anything else, saying what the file holds. The
// storages' declared sizes, and the tensors' elements, are held to `budget`
// (InputBudget) before any storage is read.
HostValue read_torch_save_value(const ByteSource& source, InputBudget& budget);
HostValue read_torch_save_value(const ByteSource& source);

}  // namespace tsarchive
