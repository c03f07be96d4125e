// Interpretation of PyTorch pickles (the format is summarised in model.h).
#include "format/model.h"

#include <algorithm>

#include <unordered_map>

namespace tsarchive {

std::string_view tensor_role_id(TensorRole role) {
  switch (role) {
    case TensorRole::Parameter: return "parameter";
    case TensorRole::Buffer: return "buffer";
    case TensorRole::Attribute: return "attribute";
    case TensorRole::Constant: return "constant";
    case TensorRole::State: return "state";
  }
  return "attribute";
}

namespace {

// `scalar_type`: c10::ScalarType's code (the position in libtorch's
// AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS list), -1 for none. The JIT
// unpickler knows the storage class torch.<Name>Storage of each ScalarType its
// libtorch lists; torch.save writes dtypes without a typed storage class as
// an UntypedStorage and names the dtype in _rebuild_tensor_v3.
struct DtypeRow {
  const char* storage;
  const char* dtype;
  uint64_t size;
  int scalar_type;
};

constexpr DtypeRow kDtypes[] = {
    {"ByteStorage", "uint8", 1, 0},
    {"CharStorage", "int8", 1, 1},
    {"ShortStorage", "int16", 2, 2},
    {"IntStorage", "int32", 4, 3},
    {"LongStorage", "int64", 8, 4},
    {"HalfStorage", "float16", 2, 5},
    {"FloatStorage", "float32", 4, 6},
    {"DoubleStorage", "float64", 8, 7},
    {"ComplexHalfStorage", "complex32", 4, 8},
    {"ComplexFloatStorage", "complex64", 8, 9},
    {"ComplexDoubleStorage", "complex128", 16, 10},
    {"BoolStorage", "bool", 1, 11},
    {"QInt8Storage", "qint8", 1, 12},
    {"QUInt8Storage", "quint8", 1, 13},
    {"QInt32Storage", "qint32", 4, 14},
    {"BFloat16Storage", "bfloat16", 2, 15},
    {"QUInt4x2Storage", "quint4x2", 1, 16},
    {"QUInt2x4Storage", "quint2x4", 1, 17},
    {"Bits1x8Storage", "bits1x8", 1, 18},
    {"Bits2x4Storage", "bits2x4", 1, 19},
    {"Bits4x2Storage", "bits4x2", 1, 20},
    {"Bits8Storage", "bits8", 1, 21},
    {"Bits16Storage", "bits16", 2, 22},
    {"Float8_e5m2Storage", "float8_e5m2", 1, 23},
    {"Float8_e4m3fnStorage", "float8_e4m3fn", 1, 24},
    {"Float8_e5m2fnuzStorage", "float8_e5m2fnuz", 1, 25},
    {"Float8_e4m3fnuzStorage", "float8_e4m3fnuz", 1, 26},
    {"UInt16Storage", "uint16", 2, 27},
    {"UInt32Storage", "uint32", 4, 28},
    {"UInt64Storage", "uint64", 8, 29},
    // 30-43: uint1-uint7 and int1-int7, which no serializer writes (PyTorch 2.13's refuse them).
    {"Float8_e8m0fnuStorage", "float8_e8m0fnu", 1, 44},
    {"Float4_e2m1fn_x2Storage", "float4_e2m1fn_x2", 1, 45},
    {"UntypedStorage", "uint8", 1, -1},
};

constexpr size_t kMaxDepth = 256;
constexpr size_t kMaxVisits = 10'000'000;
constexpr size_t kMaxTensors = 1'000'000;
// A value shared through the memo is listed under every path to it, and paths
// of memo-shared dict keys grow with each level: the text is bounded too, that
// of the tensors kept, by the pickle's size (1 MiB and 256 bytes a node, at
// most 64 MiB: a real file's paths are a few times its keys' text), and that
// of the paths walked (each visit builds its path).
constexpr uint64_t kMaxTensorPathBytes = 64ull << 20;
constexpr uint64_t kTensorPathBytesPerNode = 256;
constexpr uint64_t kMaxWalkedPathBytes = 1ull << 30;

std::string join_path(const std::string& prefix, std::string_view name) {
  std::string path;
  path.reserve(prefix.size() + 1 + name.size());
  if (!prefix.empty()) path.append(prefix).push_back('.');
  path.append(name);
  return path;
}

int64_t int_or(const PickleGraph& g, PickleRef ref, int64_t fallback) {
  if (ref >= g.size() || g.at(ref).kind != PickleKind::Int) return fallback;
  return g.at(ref).integer;
}

bool int_list(const PickleGraph& g, PickleRef ref, std::vector<int64_t>* out) {
  if (ref >= g.size()) return false;
  const PickleNode& n = g.at(ref);
  if (n.kind != PickleKind::Tuple && n.kind != PickleKind::List) return false;
  for (PickleRef item : g.items(n)) {
    const int64_t v = int_or(g, item, -1);
    if (v < 0) return false;
    out->push_back(v);
  }
  return true;
}

std::string quantizer_name(const PickleGraph& g, PickleRef ref) {
  if (ref >= g.size()) return "quantized";
  const PickleNode& n = g.at(ref);
  const auto items = g.items(n);
  if (n.kind == PickleKind::Tuple && !items.empty() && g.at(items[0]).kind == PickleKind::Global) {
    return std::string(g.text2(g.at(items[0])));
  }
  return "quantized";
}

// ('storage', torch.FloatStorage, key, location, numel[, view])
bool read_storage(const PickleGraph& g, PickleRef ref, const std::string& folder, TensorInfo& t, StorageInfo& s,
                  std::string& problem) {
  const PickleNode* pid = ref < g.size() ? &g.at(ref) : nullptr;
  const PickleNode* tuple = pid && pid->kind == PickleKind::PersistentId && pid->a < g.size() ? &g.at(pid->a) : nullptr;
  const PickleSpan<PickleRef> fields = tuple != nullptr ? g.items(*tuple) : PickleSpan<PickleRef>();
  if (tuple == nullptr || tuple->kind != PickleKind::Tuple || fields.size() < 5 || !g.string_at(fields[0]) ||
      *g.string_at(fields[0]) != "storage" || g.at(fields[1]).kind != PickleKind::Global || !g.string_at(fields[2])) {
    problem = "tensor '" + t.path + "' does not refer to a storage record";
    return false;
  }
  const std::string_view storage_class = g.text2(g.at(fields[1]));
  uint64_t element_size = 0;
  if (!storage_dtype(storage_class, &t.dtype, &element_size)) {
    problem = "tensor '" + t.path + "' has unknown storage type '" + std::string(storage_class) + "'";
    return false;
  }
  const std::string_view key = *g.string_at(fields[2]);
  t.storage_record.reserve(folder.size() + 1 + key.size());
  if (!folder.empty()) t.storage_record.append(folder).push_back('/');
  t.storage_record.append(key);
  const std::optional<std::string_view> location = g.string_at(fields[3]);
  t.device = location ? *location : "?";
  const int64_t numel = int_or(g, fields[4], -1);
  if (numel < 0) {
    problem = "storage '" + t.storage_record + "' has no valid element count";
    return false;
  }
  StorageInfo declared;
  declared.record = t.storage_record;
  declared.dtype = t.dtype;
  declared.numel = static_cast<uint64_t>(numel);
  if (__builtin_mul_overflow(declared.numel, element_size, &declared.nbytes)) {
    problem = "storage '" + declared.record + "' declares an impossible size";
    return false;
  }
  declared.device = t.device;
  s = std::move(declared);  // only a storage read whole is reported
  return true;
}

class Walker {
 public:
  Walker(const PickleGraph& g, const ClassIndex* classes, std::string folder, ModelContents& out)
      : g_(g), classes_(classes), folder_(std::move(folder)), out_(out), on_path_(g.size()) {}

  void walk(PickleRef ref, const std::string& path, TensorRole role, size_t depth) {
    if (stopped_) return;
    if (ref >= g_.size()) return;
    const PickleNode& n = g_.at(ref);
    if (!can_hold_tensors(n)) return;
    // A value that holds one of its own holders through the memo (an
    // OmegaConf node's _parent, a list appended to itself) is a cycle that
    // torch.load rebuilds as such: below it is only what is being walked
    // already, and it is no deeper nesting. A value shared along two paths
    // is walked on each (tied weights are listed under both names), which
    // kMaxVisits bounds.
    if (on_path_[ref]) return;
    if (depth > kMaxDepth) return stop("values nested deeper than " + std::to_string(kMaxDepth) + " levels");
    if (++visits_ > kMaxVisits) return stop("the pickle refers to shared values too many times to walk");
    walked_path_bytes_ += path.size();
    if (walked_path_bytes_ > kMaxWalkedPathBytes) {
      return stop("the paths to shared values run past " + std::to_string(kMaxWalkedPathBytes >> 20) +
                  " MiB of text (the pickle shares values under ever longer names)");
    }
    on_path_[ref] = true;
    switch (n.kind) {
      case PickleKind::Call: walk_call(ref, path, role, depth); break;
      case PickleKind::Dict: walk_entries(n, path, role, depth); break;
      default: walk_items(n, path, role, depth); break;
    }
    on_path_[ref] = false;
  }

  // A tensor is any rebuild call; returns false when `ref` is not one.
  bool tensor(PickleRef ref, const std::string& path, TensorRole role) {
    TensorInfo t;
    t.path = path;
    t.role = role;
    StorageInfo s;
    std::string why;
    const TensorCall call = read_tensor_call(g_, ref, folder_, t, s, why);
    if (call == TensorCall::NotATensor) return false;
    if (out_.tensors.size() >= kMaxTensors) {
      stop("more than " + std::to_string(kMaxTensors) + " tensors");
      return true;
    }
    tensor_path_bytes_ += path.size();
    const uint64_t budget = std::min<uint64_t>(kMaxTensorPathBytes, (1ull << 20) + kTensorPathBytesPerNode * g_.size());
    if (tensor_path_bytes_ > budget) {
      stop("the tensors' paths run past " + std::to_string(budget >> 10) + " KiB of text, " +
           std::to_string(kTensorPathBytesPerNode) + " bytes a pickle node (a shared tensor is listed under every "
           "path to it)");
      return true;
    }
    if (call == TensorCall::Tensor && s.record.empty()) {  // a meta tensor: no storage
      finish_tensor(t, nullptr);
      return true;
    }
    if (s.record.empty()) {  // the storage itself is malformed
      problem(why);
      return true;
    }
    auto [it, inserted] = out_.storages.try_emplace(s.record);
    if (inserted) {
      it->second = std::move(s);
    } else if (it->second.dtype != s.dtype || it->second.numel != s.numel) {
      problem("storage '" + s.record + "' is declared twice with different types or sizes");
    }
    if (call == TensorCall::Malformed) {
      problem(why);
      return true;
    }
    finish_tensor(t, &it->second);
    return true;
  }

  bool stopped() const { return stopped_; }

 private:
  void stop(const std::string& why) {
    if (!stopped_) problem("stopped reading tensors: " + why);
    stopped_ = true;
  }
  void problem(const std::string& what) { out_.problems.push_back(what); }

  void finish_tensor(TensorInfo& t, const StorageInfo* s) {
    uint64_t element_size = 0;
    dtype_element_size(t.dtype, &element_size);
    uint64_t numel = 0;
    uint64_t end = 0;
    if (!tensor_extent(t.shape, t.stride, t.storage_offset, &numel, &end) ||
        __builtin_mul_overflow(numel, element_size, &t.nbytes)) {
      problem("tensor '" + t.path + "' has an impossible shape");
      return;
    }
    t.numel = numel;
    if (s != nullptr && end > s->numel) {
      problem("tensor '" + t.path + "' reaches element " + std::to_string(end - 1) + " of storage '" + s->record +
              "', which holds " + std::to_string(s->numel));
    }
    out_.tensors.push_back(std::move(t));
  }

  void walk_items(const PickleNode& n, const std::string& path, TensorRole role, size_t depth) {
    const PickleSpan<PickleRef> items = g_.items(n);
    for (size_t i = 0; i < items.size(); ++i) walk(items[i], join_path(path, std::to_string(i)), role, depth + 1);
  }

  void walk_entries(const PickleNode& n, const std::string& path, TensorRole role, size_t depth) {
    for (const auto& [k, v] : g_.entries(n)) {
      const PickleNode& key = g_.at(k);
      if (key.kind == PickleKind::String) walk(v, join_path(path, g_.text(key)), role, depth + 1);
      else if (key.kind == PickleKind::Int) walk(v, join_path(path, std::to_string(key.integer)), role, depth + 1);
    }
  }

  void walk_call(PickleRef ref, const std::string& path, TensorRole role, size_t depth) {
    if (tensor(ref, path, role)) {
      quantizer_tensors(ref, path, role);
      return;
    }
    const PickleNode& n = g_.at(ref);
    const PickleNode* fn = g_.callable(ref);
    if (fn != nullptr && g_.text(*fn) == "torch.jit._pickle") {  // build_*list, restore_type_tag
      const auto args = g_.call_args(ref);
      if (!args.empty()) walk(args[0], path, role, depth + 1);
      return;
    }
    const bool is_class = fn != nullptr && g_.text(*fn).substr(0, 9) == "__torch__";
    if (is_class) return walk_object(ref, path, role, depth);
    if (fn != nullptr && g_.text(*fn) == "torch._utils" && g_.text2(*fn) == "_rebuild_sparse_tensor") {
      return sparse_tensor(ref, path, role);
    }
    if (fn != nullptr && mapping_class(*fn)) {
      walk_mapping_argument(ref, path, role, depth);
    } else {
      walk_arguments(ref, path, role, depth);
    }
    // Any other call (OrderedDict, ...): its SETITEMs, APPENDs and BUILD state.
    walk_entries(n, path, role, depth);
    walk_items(n, path, role, depth);
    if (n.state != kNoPickleRef) walk(n.state, path, role, depth + 1);
  }

  // The arguments of any other call hold what torch.load builds before it
  // calls: a GraphModule's parameters are in the body dict of
  // reduce_graph_module(body, import_block), a nested tensor's buffer in
  // _rebuild_nested_tensor's. One argument that can hold tensors is walked
  // under the call's own path; several under their positions.
  void walk_arguments(PickleRef ref, const std::string& path, TensorRole role, size_t depth) {
    const auto args = g_.call_args(ref);
    size_t holders = 0;
    for (PickleRef a : args) holders += a < g_.size() && can_hold_tensors(g_.at(a)) ? 1 : 0;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] >= g_.size() || !can_hold_tensors(g_.at(args[i]))) continue;
      walk(args[i], holders == 1 ? path : join_path(path, std::to_string(i)), role, depth + 1);
    }
  }
  static bool can_hold_tensors(const PickleNode& n) {
    return n.kind == PickleKind::Call || n.kind == PickleKind::Dict || n.kind == PickleKind::List ||
           n.kind == PickleKind::Tuple || n.kind == PickleKind::Set;
  }

  // torch._utils._rebuild_sparse_tensor(layout, data): a sparse tensor is made
  // of dense ones, each with its storage, listed under the names of PyTorch's
  // accessors: COO (indices, values, size[, is_coalesced]), CSR and BSR
  // (crow_indices, col_indices, values, size), CSC and BSC (ccol_indices,
  // row_indices, values, size). The layout is torch.serialization._get_layout("torch.sparse_csr").
  void sparse_tensor(PickleRef ref, const std::string& path, TensorRole role) {
    const auto args = g_.call_args(ref);
    if (args.size() < 2 || args[1] >= g_.size() || g_.at(args[1]).kind != PickleKind::Tuple) {
      return problem("sparse tensor '" + path + "' has malformed rebuild arguments");
    }
    std::string layout;
    if (args[0] < g_.size() && g_.at(args[0]).kind == PickleKind::Call) {
      const auto layout_args = g_.call_args(args[0]);
      if (!layout_args.empty()) layout = std::string(g_.string_at(layout_args[0]).value_or(""));
    }
    static const char* const kCoo[] = {"indices", "values"};
    static const char* const kRows[] = {"crow_indices", "col_indices", "values"};
    static const char* const kColumns[] = {"ccol_indices", "row_indices", "values"};
    const bool coo = layout == "torch.sparse_coo";
    const bool rows = layout == "torch.sparse_csr" || layout == "torch.sparse_bsr";
    const bool columns = layout == "torch.sparse_csc" || layout == "torch.sparse_bsc";
    if (!coo && !rows && !columns) return problem("sparse tensor '" + path + "' has an unknown layout '" + layout + "'");
    const char* const* names = coo ? kCoo : rows ? kRows : kColumns;
    const size_t count = coo ? 2 : 3;
    const auto parts = g_.items(g_.at(args[1]));
    for (size_t i = 0; i < count && i < parts.size(); ++i) {
      const std::string part = join_path(path, names[i]);
      if (parts[i] >= g_.size() || !tensor(parts[i], part, role)) {
        problem("sparse tensor '" + path + "' has no tensor for its " + names[i]);
      }
    }
  }

  // collections.OrderedDict and dict called with their items: how Python 2's
  // OrderedDict.__reduce__ pickled one (legacy torch.save files such as
  // lpips' weights), and what a __reduce__ returning (dict, (items,)) writes.
  bool mapping_class(const PickleNode& fn) const {
    const std::string_view module = g_.text(fn), name = g_.text2(fn);
    return (module == "collections" && name == "OrderedDict") ||
           ((module == "builtins" || module == "__builtin__") && name == "dict");
  }
  // The first argument: a list or tuple of [key, value] pairs, whose keys
  // name the values as SETITEMS' keys do, or a mapping, walked as one.
  void walk_mapping_argument(PickleRef ref, const std::string& path, TensorRole role, size_t depth) {
    const auto args = g_.call_args(ref);
    if (args.empty() || args[0] >= g_.size()) return;
    const PickleNode& items = g_.at(args[0]);
    if (items.kind != PickleKind::List && items.kind != PickleKind::Tuple) return walk(args[0], path, role, depth + 1);
    for (PickleRef item : g_.items(items)) {
      if (item >= g_.size()) continue;
      const PickleNode& pair = g_.at(item);
      const auto kv = g_.items(pair);
      if ((pair.kind != PickleKind::List && pair.kind != PickleKind::Tuple) || kv.size() != 2 || kv[0] >= g_.size()) {
        continue;
      }
      const PickleNode& key = g_.at(kv[0]);
      if (key.kind == PickleKind::String) walk(kv[1], join_path(path, g_.text(key)), role, depth + 2);
      else if (key.kind == PickleKind::Int) walk(kv[1], join_path(path, std::to_string(key.integer)), role, depth + 2);
    }
  }

  // A per-channel quantized tensor (_rebuild_qtensor) keeps its scales and
  // zero points in tensors of their own, with storages of their own:
  // (torch.per_channel_affine, scales, zero_points, axis). Named as PyTorch's
  // accessors name them.
  void quantizer_tensors(PickleRef ref, const std::string& path, TensorRole role) {
    if (!g_.calls(ref, "torch._utils", "_rebuild_qtensor")) return;
    const auto args = g_.call_args(ref);
    if (args.size() <= 4 || args[4] >= g_.size()) return;
    const PickleNode& params = g_.at(args[4]);
    const auto fields = g_.items(params);
    if (params.kind != PickleKind::Tuple || fields.size() < 3) return;
    const char* names[] = {"q_per_channel_scales", "q_per_channel_zero_points"};
    for (size_t i = 0; i < 2; ++i) {
      const PickleRef item = fields[i + 1];
      if (item < g_.size() && g_.at(item).kind == PickleKind::Call) tensor(item, path + "." + names[i], role);
    }
  }

  void walk_object(PickleRef ref, const std::string& path, TensorRole role, size_t depth) {
    const PickleNode& n = g_.at(ref);
    const PickleNode& cls = g_.at(n.a);
    std::string type(g_.text(cls));
    type += '.';
    type += g_.text2(cls);
    const CodeClass* code = nullptr;
    if (classes_ != nullptr) {
      auto it = classes_->find(type);
      if (it != classes_->end()) code = it->second;
    }
    // torchbind objects (__torch__.torch.classes.*) and TorchScript classes are not modules.
    const bool torchbind = type.rfind("__torch__.torch.classes.", 0) == 0;
    if (code != nullptr ? code->base == "Module" : !torchbind) out_.modules.push_back({path, type});
    if (n.state != kNoPickleRef && n.state < g_.size() && g_.at(n.state).kind == PickleKind::Dict) {
      const RoleIndex* roles = code != nullptr ? &roles_of(*code) : nullptr;
      for (const auto& [k, v] : g_.entries(g_.at(n.state))) {
        const std::optional<std::string_view> name = g_.string_at(k);
        if (!name) continue;
        TensorRole attr_role = role == TensorRole::State ? role : TensorRole::Attribute;
        if (roles != nullptr) {
          const auto it = roles->find(*name);
          if (it != roles->end()) attr_role = it->second;
        }
        walk(v, join_path(path, *name), attr_role, depth + 1);
      }
    } else if (n.state != kNoPickleRef) {
      walk(n.state, path, role, depth + 1);  // __getstate__ tuples (packed params, custom classes)
    }
  }

  // Attribute name -> parameter/buffer, per class, built on first use.
  using RoleIndex = std::unordered_map<std::string_view, TensorRole>;
  const RoleIndex& roles_of(const CodeClass& c) {
    auto [it, inserted] = roles_.try_emplace(&c);
    if (inserted) {
      for (const auto& p : c.parameters) it->second.emplace(p, TensorRole::Parameter);
      for (const auto& b : c.buffers) it->second.emplace(b, TensorRole::Buffer);
    }
    return it->second;
  }

  const PickleGraph& g_;
  const ClassIndex* classes_;
  std::unordered_map<const CodeClass*, RoleIndex> roles_;
  std::string folder_;
  ModelContents& out_;
  size_t visits_ = 0;
  uint64_t walked_path_bytes_ = 0;
  uint64_t tensor_path_bytes_ = 0;
  bool stopped_ = false;
  std::vector<bool> on_path_;  // by node: a holder of the value being walked
};

}  // namespace

bool storage_dtype(std::string_view storage_class, std::string* dtype, uint64_t* element_size) {
  for (const DtypeRow& row : kDtypes) {
    if (storage_class == row.storage) {
      *dtype = row.dtype;
      *element_size = row.size;
      return true;
    }
  }
  return false;
}

int dtype_scalar_type(std::string_view dtype) {
  for (const DtypeRow& row : kDtypes) {
    if (dtype == row.dtype && row.scalar_type >= 0) return row.scalar_type;
  }
  return -1;
}

bool dtype_element_size(std::string_view dtype, uint64_t* element_size) {
  for (const DtypeRow& row : kDtypes) {
    if (dtype == row.dtype) {
      *element_size = row.size;
      return true;
    }
  }
  return false;
}

namespace {

// A rebuild function `fn` (a GLOBAL) called with `args`.
TensorCall read_rebuild(const PickleGraph& g, const PickleNode& fn, PickleSpan<PickleRef> args,
                        const std::string& folder, TensorInfo& t, StorageInfo& s, std::string& problem) {
  if (g.text(fn) != "torch._utils") return TensorCall::NotATensor;
  const std::string_view name = g.text2(fn);
  if (name == "_rebuild_parameter" || name == "_rebuild_parameter_with_state") {
    if (args.empty()) return TensorCall::NotATensor;
    if (t.role != TensorRole::State) t.role = TensorRole::Parameter;
    return read_tensor_call(g, args[0], folder, t, s, problem);
  }
  if (name == "_rebuild_meta_tensor_no_storage") {  // (dtype, size, stride, requires_grad): no data
    if (args.size() < 3 || g.at(args[0]).kind != PickleKind::Global || !int_list(g, args[1], &t.shape) ||
        !int_list(g, args[2], &t.stride) || t.shape.size() != t.stride.size()) {
      problem = "tensor '" + t.path + "' is a meta tensor with a malformed dtype, size or stride";
      return TensorCall::Malformed;
    }
    t.dtype = g.text2(g.at(args[0]));
    t.device = "meta";
    return TensorCall::Tensor;
  }
  const bool v2 = name == "_rebuild_tensor_v2" || name == "_rebuild_tensor";
  const bool v3 = name == "_rebuild_tensor_v3";
  const bool q = name == "_rebuild_qtensor";
  if (!v2 && !v3 && !q) return TensorCall::NotATensor;
  if (args.size() < 4) {
    problem = "tensor '" + t.path + "' has " + std::to_string(args.size()) + " rebuild arguments, expected at least 4";
    return TensorCall::Malformed;
  }
  if (!read_storage(g, args[0], folder, t, s, problem)) return TensorCall::Malformed;
  t.storage_offset = int_or(g, args[1], -1);
  if (!int_list(g, args[2], &t.shape) || !int_list(g, args[3], &t.stride) || t.storage_offset < 0 ||
      t.shape.size() != t.stride.size()) {
    problem = "tensor '" + t.path + "' has a malformed size, stride or offset";
    return TensorCall::Malformed;
  }
  if (q && args.size() > 4) t.quantization = quantizer_name(g, args[4]);
  if (v3 && args.size() > 6 && g.at(args[6]).kind == PickleKind::Global) {
    // The dtype of a storage saved untyped (uint16, float8_e8m0fnu, ...): one
    // this reader does not know is said, not read as the storage's bytes.
    const std::string_view dtype = g.text2(g.at(args[6]));
    uint64_t size = 0;
    if (!dtype_element_size(dtype, &size)) {
      problem = "tensor '" + t.path + "' has dtype torch." + std::string(dtype) + ", which this reader does not know";
      return TensorCall::Malformed;
    }
    t.dtype = dtype;
  }
  const size_t flag_index = q ? 5 : 4;
  if (args.size() > flag_index && g.at(args[flag_index]).kind == PickleKind::Bool) {
    t.requires_grad = g.at(args[flag_index]).boolean;
  }
  return TensorCall::Tensor;
}

}  // namespace

TensorCall read_tensor_call(const PickleGraph& g, PickleRef ref, const std::string& folder, TensorInfo& t,
                            StorageInfo& s, std::string& problem) {
  const PickleNode* fn = g.callable(ref);
  if (fn == nullptr) return TensorCall::NotATensor;
  if (g.text(*fn) == "torch._tensor" && g.text2(*fn) == "_rebuild_from_type_v2") {
    // (func, type, args, state): a tensor with Python attributes, or of a
    // subclass, is func(*args) given that type and state.
    const auto args = g.call_args(ref);
    if (args.size() < 3 || args[0] >= g.size() || args[2] >= g.size() || g.at(args[0]).kind != PickleKind::Global ||
        g.at(args[2]).kind != PickleKind::Tuple) {
      return TensorCall::NotATensor;
    }
    return read_rebuild(g, g.at(args[0]), g.items(g.at(args[2])), folder, t, s, problem);
  }
  return read_rebuild(g, *fn, g.call_args(ref), folder, t, s, problem);
}

bool tensor_extent(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride, int64_t offset,
                   uint64_t* numel, uint64_t* end) {
  if (shape.size() != stride.size() || offset < 0) return false;
  uint64_t count = 1;
  uint64_t last = static_cast<uint64_t>(offset);
  bool overflow = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0 || stride[i] < 0) return false;
    const uint64_t dim = static_cast<uint64_t>(shape[i]);
    overflow |= __builtin_mul_overflow(count, dim, &count);
    if (dim > 0) {
      uint64_t step = 0;
      overflow |= __builtin_mul_overflow(dim - 1, static_cast<uint64_t>(stride[i]), &step);
      overflow |= __builtin_add_overflow(last, step, &last);
    }
  }
  if (overflow || (count > 0 && last == UINT64_MAX)) return false;
  *numel = count;
  *end = count == 0 ? 0 : last + 1;
  return true;
}

void collect_module(const PickleGraph& graph, const ClassIndex& classes, ModelContents& out) {
  // torch.jit.load takes data.pkl's value for the module object (toObject):
  // anything else, a list for one, fails to load.
  const PickleNode* cls = graph.callable(graph.root());
  if (cls == nullptr || graph.text(*cls).substr(0, 9) != "__torch__") {
    out.problems.push_back("data.pkl holds no module object, which torch.jit.load needs");
  }
  Walker(graph, &classes, "data", out).walk(graph.root(), "", TensorRole::Attribute, 0);
}

void collect_constants(const PickleGraph& graph, ModelContents& out) {
  Walker walker(graph, nullptr, "constants", out);
  const PickleNode& root = graph.at(graph.root());
  if (root.kind != PickleKind::Tuple) return;
  const auto constants = graph.items(root);
  for (size_t i = 0; i < constants.size(); ++i) {
    walker.walk(constants[i], "CONSTANTS.c" + std::to_string(i), TensorRole::Constant, 1);
  }
}

std::map<std::string, StorageInfo> declared_storages(const PickleGraph& graph, const std::string& folder) {
  std::map<std::string, StorageInfo> out;
  for (size_t i = 0; i < graph.size(); ++i) {
    const PickleRef ref = static_cast<PickleRef>(i);
    if (graph.at(ref).kind != PickleKind::PersistentId) continue;
    TensorInfo t;
    StorageInfo s;
    std::string problem;
    if (read_storage(graph, ref, folder, t, s, problem)) out.try_emplace(s.record, std::move(s));
  }
  return out;
}

void collect_saved_object(const PickleGraph& graph, const std::string& folder, ModelContents& out) {
  Walker(graph, nullptr, folder, out).walk(graph.root(), "", TensorRole::State, 0);
}

}  // namespace tsarchive
