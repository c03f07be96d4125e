// Tensors and modules described by the pickles of a PyTorch archive.
//
// Tensors are REDUCE calls of
//   torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)
//   torch._utils._rebuild_tensor_v3(..., dtype, metadata)           (newer writers)
//   torch._utils._rebuild_qtensor(storage, offset, size, stride, qparams, ...)
//   torch._utils._rebuild_parameter(tensor, requires_grad, hooks)   (torch.save of Parameters)
// where storage is BINPERSID ('storage', torch.<Type>Storage, key, location, numel)
// (legacy torch.save adds a sixth view element). The bytes live in the record
// "<folder>/<key>": data/ for data.pkl, constants/ for constants.pkl.
// Modules are NEWOBJ of a __torch__.* class followed by BUILD with a dict of
// attributes; which attributes are parameters or buffers is declared in code/.
// torch.jit._pickle.build_{intlist,tensorlist,...} and restore_type_tag wrap
// plain lists and dicts.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "format/pickle.h"
#include "format/torchscript_code.h"

namespace tsarchive {

enum class TensorRole { Parameter, Buffer, Attribute, Constant, State };
std::string_view tensor_role_id(TensorRole role);

struct TensorInfo {
  std::string path;  // "encoder.0.weight", "CONSTANTS.c0", state-dict key
  TensorRole role = TensorRole::Attribute;
  std::string dtype;  // "float32", "qint8", ...
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;
  int64_t storage_offset = 0;
  std::string device;          // location recorded at save time: "cpu", "cuda:0"
  std::string storage_record;  // "data/3"
  uint64_t numel = 0;
  uint64_t nbytes = 0;         // numel * element size
  bool requires_grad = false;
  std::string quantization;    // "per_tensor_affine", "" when not quantized
};

struct StorageInfo {
  std::string record;  // "data/3"
  std::string dtype;
  uint64_t numel = 0;
  uint64_t nbytes = 0;
  std::string device;
};

struct ModuleInfo {
  std::string path;  // "" for the root
  std::string type;  // qualified class name
};

// Index of classes declared in code/, by qualified name.
using ClassIndex = std::map<std::string, const CodeClass*>;

struct ModelContents {
  std::vector<TensorInfo> tensors;
  std::vector<ModuleInfo> modules;
  std::map<std::string, StorageInfo> storages;  // by record name
  std::vector<std::string> problems;
};

// Element size and dtype name for a storage class ("FloatStorage") or a dtype
// name ("float32"); false when unknown.
bool storage_dtype(std::string_view storage_class, std::string* dtype, uint64_t* element_size);
bool dtype_element_size(std::string_view dtype, uint64_t* element_size);
// c10::ScalarType's code for a dtype name ("uint16": 27), -1 when unknown: a
// libtorch knows the codes below its count of scalar types.
int dtype_scalar_type(std::string_view dtype);

// Walks data.pkl of a TorchScript archive (a module object).
void collect_module(const PickleGraph& graph, const ClassIndex& classes, ModelContents& out);
// Walks constants.pkl (a tuple of constants; tensors become CONSTANTS.c<i>).
void collect_constants(const PickleGraph& graph, ModelContents& out);
// Walks a torch.save object (state dict, tensor, or containers of them).
// `folder` is where storages live ("data" for the ZIP format, "" for legacy).
void collect_saved_object(const PickleGraph& graph, const std::string& folder, ModelContents& out);

// Every storage a persistent id of the pickle declares, by record name,
// whatever holds it (torch.load's persistent_load makes each one).
std::map<std::string, StorageInfo> declared_storages(const PickleGraph& graph, const std::string& folder);

// One tensor rebuild call (the calls listed at the top; _rebuild_parameter is
// unwrapped and makes the role Parameter unless it is State). Fills `tensor`
// (whose path and role the caller sets first) and `storage`, the storage it
// declares. The shape is not checked against the storage: see tensor_extent.
enum class TensorCall { NotATensor, Tensor, Malformed };
TensorCall read_tensor_call(const PickleGraph& graph, PickleRef ref, const std::string& folder, TensorInfo& tensor,
                            StorageInfo& storage, std::string& problem);

// Elements of a view and `end`, one past the last storage element it reaches
// (0 when it has no elements); false when either overflows 64 bits or a
// size, stride or offset is negative.
bool tensor_extent(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride, int64_t offset,
                   uint64_t* numel, uint64_t* end);

}  // namespace tsarchive
