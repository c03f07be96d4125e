// Values in torch.save files (ZIP format), for `tsarchive run --input @x.pt`.
//
// The file is a PyTorch archive (archive.h) with data.pkl and data/<key>.
// data.pkl is one pickle, read by the safe reader (pickle.h). Accepted values:
//   None, bool, int (64-bit), float, str
//   tuple, list                      -> List
//   dict, collections.OrderedDict    -> Dict (str keys only)
//   tensors: the rebuild calls of model.h, storages as data/<key> records
// and what libtorch's torch::pickle_save (torch/csrc/jit/serialization/
// pickler.cpp) wraps around plain containers:
//   torch.jit._pickle.build_{tensor,int,double,bool}list(list)   specialized lists
//   torch.jit._pickle.restore_type_tag(dict_or_list, "Dict[str, Tensor]")
// Anything else (custom classes, quantized or sparse tensors, sets, bytes) is
// refused by name: run passes values to a TorchScript method, which could not
// take them anyway.
//
// Every storage record is read once, with its CRC checked and its size equal to
// what the pickle declares; tensors that share a storage share its bytes. A
// tensor whose view reaches past its storage is refused. Before any is read,
// the uncompressed sizes of all the data/ records, as the ZIP declares them,
// are taken from the input budget (InputBudget): torch.save writes storages
// stored, but torch.load inflates a deflated one as well, so a 3 MB file can
// declare 3 GB. Such a file is read as torch.load reads it, within the budget.
// The tensors stay views over their storages (the torch layer passes them to
// the model as torch.load does, unmaterialized), but each view's elements, a
// broadcast dimension (stride 0) counted once, are held to the budget's limit,
// all of a file's together: the Inputs table reads every such element once,
// and a few hundred bytes of sizes and strides over a 4-element storage
// (sizes [2^40, 4], strides (1, 1)) would otherwise be trillions of them.
//
// PyTorch 2.x records the storages' byte order in `byteorder`: torch.load
// swaps every element of a "big" file (complex numbers half by half) and
// refuses a value other than little or big; a file without the record is
// little-endian. The same here, so that a big-endian file is not fed to the
// model, or compared with its outputs, byte-swapped.
//
// The pickle's memo (BINGET) lets one value appear any number of times, while
// a HostValue holds its own copy of every string, dict key, shape and stride:
// a 64 MiB string, deflated to 65 KB and referenced 20 times, would be 1.3 GB.
// So everything copied out of the pickle counts against one byte budget for
// the whole file: the pickle's own size (each value copied once) plus
// kSharedCopyBytes for what honest files share (a key or a shape used twice).
// Paths in messages show long keys cut, so they stay short at any depth.
//
// Before any of that, the pickle is scanned for what torch.load would import
// and call (load_safety.h): a file that would run anything beyond the
// allowlist, or is crafted, is refused as unsafe to load (exit 8), naming the
// call, even though run itself never executes it: the same file given to
// Python would.
#include <map>

#include "format/archive.h"
#include "base/error.h"
#include "base/strings.h"
#include "contract/host_value.h"
#include "core/inputs/input_values.h"
#include "core/inspect/load_safety.h"
#include "format/model.h"
#include "format/pickle.h"

namespace tsarchive {
namespace {

constexpr size_t kMaxDepth = 64;
constexpr size_t kMaxValues = 1'000'000;  // bounds memo sharing: [x, x] nested 64 deep is 2^64 values
constexpr uint64_t kSharedCopyBytes = 64ull << 20;
constexpr size_t kMaxKeyInPath = 64;  // bytes of a dict key shown in a value's path

struct LoadedStorage {
  StorageInfo info;
  std::shared_ptr<const std::string> bytes;
};

// Whether the storages are big-endian, by the byteorder record as torch.load reads it.
bool big_endian_storages(const TorchArchive& archive) {
  const std::optional<std::string> order = archive.read_optional("byteorder", ReadLimits::kSmall);
  if (!order || *order == "little") return false;
  if (*order == "big") return true;
  throw_bad_input("the torch.save file's byteorder record holds '" + order->substr(0, 40) +
                      "', neither little nor big (torch.load refuses it too)",
                  archive.path(), "save the value again with torch.save");
}

class ValueBuilder {
 public:
  ValueBuilder(const TorchArchive& archive, const PickleGraph& graph, uint64_t pickle_bytes, const InputBudget& budget)
      : archive_(archive),
        g_(graph),
        budget_(budget),
        copy_budget_(pickle_bytes + kSharedCopyBytes),
        big_endian_(big_endian_storages(archive)) {}

  HostValue build(PickleRef ref, const std::string& where, size_t depth) {
    if (depth > kMaxDepth) fail("values nested deeper than " + std::to_string(kMaxDepth) + " levels");
    if (++values_ > kMaxValues) fail("more than " + std::to_string(kMaxValues) + " values");
    if (ref >= g_.size()) fail("a value refers to nothing");
    const PickleNode& n = g_.at(ref);
    HostValue v;
    switch (n.kind) {
      case PickleKind::None: return v;
      case PickleKind::Bool:
        v.kind = HostValue::Kind::Bool;
        v.boolean = n.boolean;
        return v;
      case PickleKind::Int:
        v.kind = HostValue::Kind::Int;
        v.integer = n.integer;
        return v;
      case PickleKind::Float:
        v.kind = HostValue::Kind::Float;
        v.real = n.real;
        return v;
      case PickleKind::String:
        v.kind = HostValue::Kind::String;
        charge(g_.text(n).size());
        v.string = g_.text(n);
        return v;
      case PickleKind::Tuple:
      case PickleKind::List: {
        v.kind = HostValue::Kind::List;
        v.tuple = n.kind == PickleKind::Tuple;
        const auto items = g_.items(n);
        v.items.reserve(items.size());
        for (size_t i = 0; i < items.size(); ++i) {
          v.items.push_back(build(items[i], where + "[" + std::to_string(i) + "]", depth + 1));
        }
        return v;
      }
      case PickleKind::Dict: return dict(n, where, depth);
      case PickleKind::Call: return call(ref, where, depth);
      case PickleKind::BigInt: return refuse(where, "an integer wider than 64 bits");
      case PickleKind::Bytes: return refuse(where, "a bytes object");
      case PickleKind::Set: return refuse(where, "a set");
      case PickleKind::Global: return refuse(where, "a reference to " + g_.global_name(n));
      case PickleKind::PersistentId: return refuse(where, "a bare storage");
    }
    return refuse(where, "an unknown value");
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw_bad_input("cannot read the torch.save file: " + why, archive_.path(),
                    "save plain tensors, lists, tuples and dicts with str keys");
  }
  // Bytes about to be copied out of the pickle; past the budget, a refusal.
  void charge(uint64_t bytes) {
    if (add_overflows(copied_bytes_, bytes, &copied_bytes_) || copied_bytes_ > copy_budget_) {
      throw_bad_input("cannot read the torch.save file: its strings, dict keys and shapes, repeated through the "
                      "pickle's memo, come to more than " + human_size(copy_budget_) + " (a memo bomb?)",
                      archive_.path(), "save each value once; run takes tensors, lists, tuples and dicts");
    }
  }

  [[noreturn]] HostValue refuse(const std::string& where, const std::string& what) const {
    throw_bad_input("the torch.save file holds " + what + (where.empty() ? "" : " at " + where) +
                        ", which run cannot take as an input",
                    archive_.path(), "save plain tensors, lists, tuples and dicts with str keys");
  }

  // Dict entries: those of a dict literal, or the SETITEMs on an OrderedDict() call.
  HostValue dict(const PickleNode& n, const std::string& where, size_t depth) {
    HostValue v;
    v.kind = HostValue::Kind::Dict;
    const auto entries = g_.entries(n);
    v.entries.reserve(entries.size());
    for (const auto& [k, value] : entries) {
      const std::optional<std::string_view> key = g_.string_at(k);
      if (!key) refuse(where, "a dict with a key that is not a string");
      charge(key->size());
      const std::string name(*key);
      const std::string shown = name.size() > kMaxKeyInPath ? name.substr(0, kMaxKeyInPath) + "..." : name;
      v.entries.emplace_back(name, build(value, where + "['" + shown + "']", depth + 1));
    }
    return v;
  }

  HostValue call(PickleRef ref, const std::string& where, size_t depth) {
    const std::string target = g_.call_target(ref);
    const auto args = g_.call_args(ref);
    if (target == "collections.OrderedDict") {
      if (!args.empty() || g_.at(ref).items.size != 0) refuse(where, "an OrderedDict built from arguments");
      return dict(g_.at(ref), where, depth);
    }
    if (target == "torch.jit._pickle.restore_type_tag" || target == "torch.jit._pickle.build_tensorlist" ||
        target == "torch.jit._pickle.build_intlist" || target == "torch.jit._pickle.build_doublelist" ||
        target == "torch.jit._pickle.build_boollist") {
      if (args.empty()) refuse(where, target + "() without arguments");
      return build(args[0], where, depth + 1);
    }
    TensorInfo t;
    t.path = where.empty() ? "(the saved value)" : where;
    StorageInfo declared;
    std::string problem;
    switch (read_tensor_call(g_, ref, "data", t, declared, problem)) {
      case TensorCall::NotATensor:
        return refuse(where, target.empty() ? "an object made by a call" : "a " + target + " object");
      case TensorCall::Malformed: fail(problem);
      case TensorCall::Tensor: break;
    }
    if (!t.quantization.empty() || t.dtype.rfind("qint", 0) == 0 || t.dtype.rfind("quint", 0) == 0) {
      refuse(where, "a quantized tensor (" + t.dtype + ")");
    }
    charge((t.shape.size() + t.stride.size()) * sizeof(int64_t));
    HostValue v;
    v.kind = HostValue::Kind::Tensor;
    v.tensor.dtype = t.dtype;
    v.tensor.shape = t.shape;
    v.tensor.stride = t.stride;
    v.tensor.offset = t.storage_offset;
    v.tensor.bytes = storage(declared);
    uint64_t numel = 0;
    uint64_t end = 0;
    if (!tensor_extent(t.shape, t.stride, t.storage_offset, &numel, &end)) {
      fail("tensor " + t.path + " has an impossible shape");
    }
    if (end > declared.numel) {
      fail("tensor " + t.path + " reaches element " + std::to_string(end - 1) + " of storage '" + declared.record +
           "', which holds " + std::to_string(declared.numel));
    }
    charge_view(t, declared);
    return v;
  }

  // A view's elements, each broadcast dimension (stride 0) counted once:
  // what reading the tensor once takes, held to the budget's limit with the
  // file's other tensors.
  void charge_view(const TensorInfo& t, const StorageInfo& declared) {
    uint64_t elements = 1;
    bool overflow = false;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.stride[d] != 0 || t.shape[d] == 0) overflow |= mul_overflows(elements, static_cast<uint64_t>(t.shape[d]), &elements);
    }
    uint64_t width = 0;
    dtype_element_size(declared.dtype, &width);
    uint64_t bytes = 0;
    overflow |= mul_overflows(elements, width, &bytes) || add_overflows(view_bytes_, bytes, &view_bytes_);
    if (!overflow && view_bytes_ <= budget_.limit()) return;
    budget_.refuse("tensor " + t.path + " (sizes " + shape_text(t.shape) + ", strides " + shape_text(t.stride) +
                       ") views its storage '" + declared.record + "' of " + human_size(declared.nbytes) + " as " +
                       (overflow ? "more than 2^64 bytes" : human_size(bytes)) + " of elements" +
                       (overflow || view_bytes_ == bytes ? "" : ", the file's tensors " + human_size(view_bytes_)),
                   archive_.path());
  }

  // The bytes of a storage record, read once; their size must be the declared one.
  std::shared_ptr<const std::string> storage(const StorageInfo& declared) {
    const auto it = storages_.find(declared.record);
    if (it != storages_.end()) {
      if (it->second.info.dtype != declared.dtype || it->second.info.numel != declared.numel) {
        fail("storage '" + declared.record + "' is declared twice with different types or sizes");
      }
      return it->second.bytes;
    }
    const Record* record = archive_.find(declared.record);
    if (record == nullptr) fail("storage record '" + declared.record + "' is missing");
    if (record->entry->uncompressed_size != declared.nbytes) {
      fail("storage record '" + declared.record + "' holds " + std::to_string(record->entry->uncompressed_size) +
           " bytes, but the pickle declares " + std::to_string(declared.numel) + " " + declared.dtype + " elements (" +
           std::to_string(declared.nbytes) + " bytes)");
    }
    std::string read = archive_.read(*record, declared.nbytes);
    if (big_endian_) {
      uint64_t width = 0;
      dtype_element_size(declared.dtype, &width);
      const bool complex = declared.dtype.rfind("complex", 0) == 0;
      swap_elements(read, static_cast<size_t>(complex ? width / 2 : width));
    }
    auto bytes = std::make_shared<const std::string>(std::move(read));
    storages_.emplace(declared.record, LoadedStorage{declared, bytes});
    return bytes;
  }

  const TorchArchive& archive_;
  const PickleGraph& g_;
  const InputBudget& budget_;
  std::map<std::string, LoadedStorage> storages_;
  size_t values_ = 0;
  uint64_t view_bytes_ = 0;
  uint64_t copied_bytes_ = 0;
  const uint64_t copy_budget_;
  const bool big_endian_;
};

void refuse_unsafe_to_load(const TorchArchive& archive) {
  const LoadSafety safety = assess_archive_load_safety(archive);
  if (!safety.unsafe()) return;
  const LoadFinding* worst = &safety.findings.front();
  for (const LoadFinding& f : safety.findings) worst = f.risk > worst->risk ? &f : worst;
  throw Error(ErrorKind::UnsafeToLoad,
              "the torch.save file is unsafe to load (" + std::string(load_risk_id(worst->risk)) + "): " + worst->where +
                  " " + worst->what,
              archive.path(), "run takes files of tensors, lists, tuples and dicts; see 'tsarchive inspect' on it");
}

// The storage records' sizes as the ZIP declares them, taken from the budget
// before any is read or inflated.
void take_storage_sizes(const TorchArchive& archive, InputBudget& budget) {
  uint64_t total = 0;
  bool overflow = false;
  for (const Record& r : archive.records()) {
    if (r.name.rfind("data/", 0) == 0) overflow |= add_overflows(total, r.entry->uncompressed_size, &total);
  }
  const std::string what = "the torch.save file's storage records, inflated,";
  if (overflow) budget.refuse(what + " would take more than 2^64 bytes", archive.path());
  budget.take(total, what, archive.path());
}

}  // namespace

HostValue read_torch_save_value(const ByteSource& source) {
  InputBudget budget;
  return read_torch_save_value(source, budget);
}

HostValue read_torch_save_value(const ByteSource& source, InputBudget& budget) {
  try {
    const TorchArchive archive(borrow_source(source));
    if (archive.kind() != FileKind::TorchSave) {
      throw_bad_input("input file is not a torch.save file: it is a " + std::string(file_kind_name(archive.kind())),
                      source.name(),
                      archive.kind() == FileKind::TorchScript ? "a model is not an input; save a tensor with torch.save"
                                                              : "save the input with torch.save or numpy.save");
    }
    refuse_unsafe_to_load(archive);
    take_storage_sizes(archive, budget);
    const Record* pickle = archive.find("data.pkl");
    const std::string bytes = archive.read(*pickle, ReadLimits::kPickle);
    const PickleGraph graph = parse_pickle(bytes, "data.pkl");
    HostValue v = ValueBuilder(archive, graph, bytes.size(), budget).build(graph.root(), "", 0);
    v.spreads = v.kind == HostValue::Kind::List;
    return v;
  } catch (const Error& e) {
    if (e.file().empty()) throw e.with_file(source.name());
    throw;
  }
}

}  // namespace tsarchive
