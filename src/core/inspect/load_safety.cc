// Load-safety verdicts; the model is described at the top of load_safety.h.
#include "core/inspect/load_safety.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include "base/error.h"
#include "base/strings.h"
#include "core/inspect/torch_package.h"
#include "format/model.h"
#include "format/pickle.h"
#include "format/pt2.h"
#include "format/tar.h"
#include "format/torchscript_code.h"

namespace tsarchive {
namespace {

// ---- allowlists -----------------------------------------------------------

// PyTorch's weights_only allowlist (torch/_weights_only_unpickler.py,
// _get_allowed_globals), as 1.13 and 2.13 define it. Storage and tensor
// classes, dtypes and rebuild functions are matched by pattern below.
const std::set<std::string, std::less<>>& torch_113_globals() {
  static const std::set<std::string, std::less<>> s = {
      "collections.OrderedDict", "torch.nn.parameter.Parameter", "torch.serialization._get_layout", "torch.Size",
      "torch.Tensor", "torch._utils._rebuild_parameter", "torch._utils._rebuild_tensor",
      "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_sparse_tensor",
      "torch._utils._rebuild_meta_tensor_no_storage", "torch._utils._rebuild_sparse_csr_tensor",
      "torch.complex32", "torch.complex64", "torch.complex128", "torch.float16", "torch.float32", "torch.float64",
      "torch.int8", "torch.int16", "torch.int32", "torch.int64", "torch.storage.TypedStorage",
      "torch.storage.UntypedStorage"};
  return s;
}
const std::set<std::string, std::less<>>& torch_2_globals() {
  static const std::set<std::string, std::less<>> s = {
      "collections.OrderedDict", "collections.Counter", "torch.nn.parameter.Parameter",
      "torch.serialization._get_layout", "torch.Size", "torch.Tensor", "torch.device", "_codecs.encode",
      "builtins.bytearray", "builtins.set", "builtins.complex", "torch._tensor._rebuild_from_type_v2",
      "torch._utils._rebuild_device_tensor_from_cpu_tensor", "torch._utils._rebuild_device_tensor_from_numpy",
      "torch._utils._rebuild_meta_tensor_no_storage", "torch._utils._rebuild_nested_tensor",
      "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state", "torch._utils._rebuild_qtensor",
      "torch._utils._rebuild_sparse_tensor", "torch._utils._rebuild_tensor", "torch._utils._rebuild_tensor_v2",
      "torch._utils._rebuild_tensor_v3", "torch._utils._rebuild_wrapper_subclass", "torch.storage.TypedStorage",
      "torch.storage.UntypedStorage", "torch.per_tensor_affine", "torch.per_tensor_symmetric",
      "torch.per_channel_affine", "torch.per_channel_symmetric", "torch.per_channel_affine_float_qparams",
      "torch.bfloat16", "torch.bool", "torch.complex32", "torch.complex64", "torch.complex128", "torch.float16",
      "torch.float32", "torch.float64", "torch.float8_e4m3fn", "torch.float8_e4m3fnuz", "torch.float8_e5m2",
      "torch.float8_e5m2fnuz", "torch.float8_e8m0fnu", "torch.float4_e2m1fn_x2", "torch.int8", "torch.int16",
      "torch.int32", "torch.int64", "torch.uint8", "torch.uint16", "torch.uint32", "torch.uint64", "torch.qint8",
      "torch.qint32", "torch.quint8", "torch.quint4x2", "torch.quint2x4", "torch.bits1x8", "torch.bits2x4",
      "torch.bits4x2", "torch.bits8", "torch.bits16", "torch.int1", "torch.int2", "torch.int3", "torch.int4",
      "torch.int5", "torch.int6", "torch.int7", "torch.uint1", "torch.uint2", "torch.uint3", "torch.uint4",
      "torch.uint5", "torch.uint6", "torch.uint7"};
  return s;
}

// torch.FloatStorage, torch.cuda.HalfTensor, torch.sparse.LongTensor, ...:
// the legacy storage and tensor classes both allowlists take.
bool legacy_type_class(std::string_view g) {
  for (std::string_view prefix : {"torch.cuda.sparse.", "torch.cuda.", "torch.sparse.", "torch."}) {
    if (g.rfind(prefix, 0) != 0) continue;
    const std::string_view name = g.substr(prefix.size());
    if (name.find('.') != std::string_view::npos || name.empty()) return false;
    const bool storage = ends_with(name, "Storage") && prefix != "torch.sparse." && prefix != "torch.cuda.sparse.";
    const bool tensor = ends_with(name, "Tensor") && name != "Tensor";
    return (storage || tensor) && name[0] >= 'A' && name[0] <= 'Z';
  }
  return false;
}

std::pair<int, int> parse_version(std::string_view v) {
  int major = 0, minor = 0;
  size_t i = 0;
  while (i < v.size() && v[i] >= '0' && v[i] <= '9') major = major * 10 + (v[i++] - '0');
  if (i < v.size() && v[i] == '.') ++i;
  while (i < v.size() && v[i] >= '0' && v[i] <= '9') minor = minor * 10 + (v[i++] - '0');
  return {major, minor};
}
bool version_before(std::string_view v, int major, int minor) { return parse_version(v) < std::make_pair(major, minor); }

// Globals that only rebuild tensors, storages, dtypes and plain containers:
// what `run --input` may read.
bool tensor_rebuilding_global(std::string_view g) {
  if (legacy_type_class(g)) return true;
  if (torch_2_globals().count(g) && g.rfind("builtins.", 0) != 0 && g != "_codecs.encode") return true;
  return g == "collections.OrderedDict" || g == "torch._utils._rebuild_sparse_csr_tensor" ||
         g.rfind("torch.jit._pickle.", 0) == 0;
}

// Python 2 names, as pickle.Unpickler maps them for protocols 0-2
// (_compat_pickle; fix_imports) and PyTorch 2's weights_only unpickler maps
// them always: the ones that lead to a name of the allowlists.
std::string compat_name(std::string_view g) {
  static const std::map<std::string_view, std::string_view> kNames = {
      {"__builtin__.xrange", "builtins.range"}, {"__builtin__.unicode", "builtins.str"},
      {"__builtin__.long", "builtins.int"},     {"__builtin__.basestring", "builtins.str"},
      {"__builtin__.unichr", "builtins.chr"},   {"__builtin__.reduce", "functools.reduce"},
      {"__builtin__.intern", "sys.intern"}};
  if (const auto it = kNames.find(g); it != kNames.end()) return std::string(it->second);
  for (const auto& [py2, py3] : {std::pair<std::string_view, std::string_view>{"__builtin__.", "builtins."},
                                 {"copy_reg.", "copyreg."}, {"cPickle.", "pickle."}}) {
    if (g.rfind(py2, 0) == 0) return std::string(py3) + std::string(g.substr(py2.size()));
  }
  return std::string(g);
}

// Known dangerous modules and names: a naming aid only.
struct Danger {
  const char* prefix;  // "module." or "module.name"
  const char* category;
};
constexpr Danger kDangers[] = {
    {"os.system", "process execution"}, {"os.popen", "process execution"}, {"os.exec", "process execution"},
    {"os.spawn", "process execution"}, {"os.posix_spawn", "process execution"}, {"os.fork", "process execution"},
    {"posix.", "process execution"}, {"nt.", "process execution"}, {"subprocess.", "process execution"},
    {"pty.", "process execution"}, {"commands.", "process execution"}, {"multiprocessing.", "process execution"},
    {"_posixsubprocess.", "process execution"}, {"torch.utils.collect_env.", "process execution"},
    {"asyncio.subprocess", "process execution"}, {"builtins.eval", "code evaluation"},
    {"builtins.exec", "code evaluation"}, {"builtins.compile", "code evaluation"}, {"__builtin__.eval", "code evaluation"},
    {"__builtin__.exec", "code evaluation"}, {"marshal.", "code evaluation"}, {"types.CodeType", "code evaluation"},
    {"types.FunctionType", "code evaluation"}, {"code.", "code evaluation"}, {"codeop.", "code evaluation"},
    {"runpy.", "code evaluation"},
    // A GraphModule's reduce functions exec() the Python source the file holds (its forward).
    {"torch.fx.graph_module.reduce_graph_module", "code evaluation (Python source from the file)"},
    {"torch.fx.graph_module.reduce_package_graph_module", "code evaluation (Python source from the file)"},
    {"torch.fx.graph_module.reduce_deploy_graph_module", "code evaluation (Python source from the file)"},
    {"torch.fx.graph_module._deserialize_graph_module", "code evaluation (Python source from the file)"},
    {"pickle.", "code evaluation (a nested pickle)"},
    {"_pickle.", "code evaluation (a nested pickle)"}, {"dill.", "code evaluation (a nested pickle)"},
    {"cloudpickle.", "code evaluation (a nested pickle)"}, {"joblib.", "code evaluation (a nested pickle)"},
    {"numpy.load", "code evaluation (a nested pickle)"}, {"torch.load", "code evaluation (a nested pickle)"},
    {"torch.jit.load", "code evaluation (TorchScript)"}, {"torch.serialization.load", "code evaluation (a nested pickle)"},
    {"ctypes.", "native code"}, {"_ctypes.", "native code"}, {"cffi.", "native code"},
    {"builtins.__import__", "import machinery"}, {"__builtin__.__import__", "import machinery"},
    {"importlib.", "import machinery"}, {"pkgutil.", "import machinery"}, {"imp.", "import machinery"},
    {"zipimport.", "import machinery"}, {"sys.", "import machinery"}, {"copyreg._extension_registry", "import machinery"},
    {"builtins.getattr", "attribute access (reaches any function)"},
    {"__builtin__.getattr", "attribute access (reaches any function)"},
    {"builtins.globals", "attribute access (reaches any function)"},
    {"builtins.vars", "attribute access (reaches any function)"},
    {"operator.attrgetter", "attribute access (reaches any function)"},
    {"operator.methodcaller", "attribute access (reaches any function)"},
    {"operator.getitem", "attribute access (reaches any function)"},
    {"functools.partial", "attribute access (reaches any function)"}, {"builtins.setattr", "attribute change"},
    {"builtins.delattr", "attribute change"}, {"builtins.open", "file I/O"}, {"io.", "file I/O"},
    {"_io.", "file I/O"}, {"os.", "file I/O"}, {"shutil.", "file I/O"}, {"pathlib.", "file I/O"},
    {"tempfile.", "file I/O"}, {"glob.", "file I/O"}, {"fileinput.", "file I/O"}, {"numpy.fromfile", "file I/O"},
    {"numpy.save", "file I/O"}, {"numpy.memmap", "file I/O"}, {"torch.save", "file I/O"},
    {"torch.from_file", "file I/O"}, {"socket.", "network I/O"}, {"_socket.", "network I/O"},
    {"urllib.", "network I/O"}, {"urllib2.", "network I/O"}, {"http.", "network I/O"}, {"httplib.", "network I/O"},
    {"requests.", "network I/O"}, {"ftplib.", "network I/O"}, {"smtplib.", "network I/O"},
    {"telnetlib.", "network I/O"}, {"webbrowser.", "network I/O"}, {"ssl.", "network I/O"},
    {"torch.hub.", "network I/O"}, {"builtins.breakpoint", "debugger"}, {"pdb.", "debugger"},
    {"bdb.", "debugger"}, {"signal.", "process control"}, {"resource.", "process control"},
};

// Globals that are benign beyond PyTorch's list: numpy scalars and arrays
// (numpy state in optimizer and RNG checkpoints; at protocol 5 numpy reduces
// an array to numeric._frombuffer(buffer, dtype, shape, order), which is
// numpy.frombuffer, refusing object dtypes, then a reshape), plain builtins,
// and TorchScript's own pickle helpers.
const std::set<std::string, std::less<>>& extra_benign_globals() {
  static const std::set<std::string, std::less<>> s = {
      "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar", "numpy.core.multiarray._reconstruct",
      "numpy._core.multiarray._reconstruct", "numpy.core.numeric._frombuffer", "numpy._core.numeric._frombuffer",
      "numpy.dtype", "numpy.ndarray", "builtins.dict", "builtins.list",
      "builtins.tuple", "builtins.frozenset", "builtins.slice", "builtins.range", "builtins.int", "builtins.float",
      "builtins.bool", "builtins.str", "builtins.bytes", "__builtin__.set", "__builtin__.frozenset",
      "__builtin__.complex", "__builtin__.slice", "collections.defaultdict", "collections.deque",
      "torch.nn.parameter.Buffer", "torch.nn.parameter.UninitializedParameter", "torch.jit._pickle.build_intlist",
      "torch.jit._pickle.build_doublelist", "torch.jit._pickle.build_boollist", "torch.jit._pickle.build_tensorlist",
      "torch.jit._pickle.build_tensor_from_id", "torch.jit._pickle.restore_type_tag", "torch.memory_format",
      "torch.contiguous_format", "torch.channels_last", "torch.channels_last_3d", "torch.preserve_format",
      "torch.strided", "torch.sparse_coo", "torch.sparse_csr", "torch.sparse_csc", "torch.sparse_bsr",
      "torch.sparse_bsc", "torch._mkldnn"};
  return s;
}

// `dotted`: an import whose name part holds a dot, which protocol 4's
// find_class follows attribute by attribute from the module (mymodel +
// "os.system" is mymodel.os.system, the os module nearly every module
// imports): only its exact full name allows it, never a wildcard.
bool allowed_by_user(std::string_view g, const LoadSafetyOptions& o, bool dotted = false) {
  for (const std::string& a : o.allowed_globals) {
    if (a == g) return true;
    if (!dotted && ends_with(a, ".*") && g.size() > a.size() - 1 && g.compare(0, a.size() - 1, a, 0, a.size() - 1) == 0) {
      return true;
    }
  }
  return false;
}

// ---- weights_only's opcode set ----------------------------------------------

bool weights_only_opcode(uint8_t op, std::string_view torch_version) {
  // 1.13 and 2.x alike; 2.x adds BINFLOAT.
  static const char kOps[] = "a" "e" "h" "J" "K" "M" "Q" "q" "X" "b" "}" "]" ")" "c" "j" "r" "(" "N" "R" "s" "u"
                             "U" "." "t";
  if (op == 0x8f || op == 0x8a || op == 0x89 || op == 0x81 || op == 0x88 || op == 0x80 || op == 0x85 ||
      op == 0x86 || op == 0x87) {
    return true;  // EMPTY_SET LONG1 NEWFALSE NEWOBJ NEWTRUE PROTO TUPLE1-3
  }
  if (op == 'G') return !version_before(torch_version, 2, 0);
  return op != 0 && std::strchr(kOps, op) != nullptr;
}

// ---- the assessment -----------------------------------------------------------

// What one file's verdict lists, whatever its pickles hold: a real file has a
// handful of findings and a few dozen globals; a crafted one that names
// thousands of long globals over many pickles is reported, not kept.
constexpr size_t kMaxFindings = 1000;
constexpr size_t kMaxListedNames = 4096;  // globals, callables, unlisted names, custom classes

enum class PickleRole {
  TorchSave,       // data.pkl of a torch.save ZIP: torch.load
  Legacy,          // a pickle of a legacy torch.save stream: torch.load
  LegacyTar,       // a pickle of a legacy torch.save tar file's member: torch.load
  Plain,           // a plain pickle file: pickle.load, torch.load (legacy path)
  TorchScript,     // data.pkl, constants.pkl, bytecode.pkl: torch.jit.load's own unpickler
  Pt2Payload,      // a .pt2 weight or constant stored as a pickle: torch.export.load
};

class Assessor {
 public:
  Assessor(const LoadSafetyOptions& o, std::string path) : o_(o), path_(std::move(path)) {
    out_.torch_version = o.torch_version.empty() ? kNewestTorchVersion : o.torch_version;
  }

  LoadSafety finish() { return std::move(out_); }

  // Scans one pickle and records what it imports and calls. Returns the scan.
  // `to_file_end`: the bytes run to the end of the file, so a pickle that runs
  // out of them is cut short (an interrupted download or write): damage, not
  // a shape some writer chose. What it imports and calls before the cut is
  // judged as usual.
  PickleScan pickle(std::string_view bytes, const std::string& where, PickleRole role, bool whole_record,
                    bool to_file_end = false) {
    out_.pickles.push_back(where);
    PickleScan scan = scan_pickle(bytes);
    record(scan, where, role);
    if (!scan.complete && scan.ran_out && to_file_end) {
      out_.damage.push_back(where + " is cut short: " + scan.error + "; the file ends there");
    } else if (!scan.complete) {
      crafted(where, "ends early: " + scan.error,
              "every loader: pickle.load and torch.load fail part-way, after running the calls before that point");
    } else if (whole_record && scan.end < bytes.size()) {
      PickleScan hidden = scan_pickle(bytes, scan.end);
      if (hidden.complete && hidden.end > 0) {
        crafted(where, "hides a second pickle after STOP (offset " + std::to_string(scan.end) + ", " +
                           std::to_string(bytes.size() - scan.end) + " bytes)",
                "scanners and loaders that read on past STOP (a loop of pickle.load) disagree on what the file holds");
        record(hidden, where + " (second pickle)", role, false);
      } else {
        crafted(where, "continues after STOP with " + std::to_string(bytes.size() - scan.end) + " bytes",
                "readers that parse on past STOP see something else than torch.load");
      }
    }
    return scan;
  }

  void finding(LoadRisk risk, const std::string& where, std::string what, const std::string& global,
               const std::string& category, const std::string& attacks = {}) {
    if (out_.findings.size() >= kMaxFindings) {
      if (!findings_cut_) {
        findings_cut_ = true;
        out_.findings.push_back(LoadFinding{LoadRisk::Crafted, "the file",
                                            "more than " + std::to_string(kMaxFindings) +
                                                " findings, past what any PyTorch file holds; the rest are not listed",
                                            {}, {}, "scanners and reports that keep every finding in memory"});
      }
      return;
    }
    const std::string key = where + "\n" + what;
    if (!seen_findings_.insert(key).second) return;
    out_.findings.push_back(LoadFinding{risk, where, std::move(what), global, category, attacks});
  }
  void crafted(const std::string& where, std::string what, const std::string& attacks) {
    finding(LoadRisk::Crafted, where, std::move(what), {}, {}, attacks);
  }

  // Persistent ids: the five-tuple ('storage', type, key, location, numel) of
  // the ZIP formats; the legacy stream's six-tuple, or four for a module's
  // source; in the legacy tar format, a storage's key (not a tuple) or the
  // three-tuple (class, source file, source) of a module.
  void check_persistent_ids(const PickleScan& scan, const std::string& where, PickleRole role) {
    const bool legacy = role == PickleRole::Legacy, tar = role == PickleRole::LegacyTar;
    for (const PicklePersistentId& p : scan.persistent_ids) {
      const bool ok = tar      ? !p.tuple || p.size == 3
                      : legacy ? p.tuple && ((p.size == 6 && p.first == "storage") || (p.size == 4 && p.first == "module"))
                               : p.tuple && p.size == 5 && p.first == "storage" && !p.storage_type.empty() &&
                                     !p.key.empty() && p.numel >= 0;
      if (ok) continue;
      std::string shape = p.tuple ? "a " + std::to_string(p.size) + "-tuple" : "not a tuple";
      if (!p.first.empty()) shape += " starting '" + p.first.substr(0, 40) + "'";
      const char* expected = tar ? "a key or the three-tuple" : legacy ? "the six-tuple" : "the five-tuple";
      crafted(where, "a persistent id that is not " + std::string(expected) + " torch writes (" + shape + ", offset " +
                         std::to_string(p.offset) + ")",
              "torch.load before 2.10 (its persistent_load trusts the id's shape); scanners that skip persistent ids");
    }
  }

  // Storages: each record of data/ must hold exactly the bytes its persistent id declares.
  void check_storages(const TorchArchive& archive, const PickleScan& scan, const std::string& where,
                      const std::string& folder) {
    std::map<std::string, std::pair<std::string, int64_t>> declared;
    for (const PicklePersistentId& p : scan.persistent_ids) {
      if (!p.tuple || p.size != 5 || p.first != "storage" || p.key.empty() || p.numel < 0) continue;
      std::string cls = p.storage_type.substr(p.storage_type.rfind('.') + 1);
      const auto [it, fresh] = declared.emplace(p.key, std::make_pair(cls, p.numel));
      if (!fresh && it->second != std::make_pair(cls, p.numel)) {
        crafted(where, "storage '" + p.key + "' is declared twice, as " + std::to_string(it->second.second) + " " +
                           it->second.first + " and as " + std::to_string(p.numel) + " " + cls,
                "torch.load before 2.10 (one storage read with two sizes or dtypes: out-of-bounds memory)");
        continue;
      }
      if (!fresh) continue;
      std::string dtype;
      uint64_t element = 0;
      const Record* r = archive.find(folder + "/" + p.key);
      if (r == nullptr) {
        crafted(where, "storage '" + p.key + "' has no record " + folder + "/" + p.key,
                "torch.load fails; scanners that do not follow storages miss it");
        continue;
      }
      uint64_t numel = static_cast<uint64_t>(p.numel), nbytes = 0;
      // UntypedStorage/TypedStorage ids carry a dtype, not a storage class: bytes unknown here.
      if (!storage_dtype(cls, &dtype, &element)) continue;
      if (mul_overflows(numel, element, &nbytes) || nbytes != r->entry->uncompressed_size) {
        crafted(where, "storage '" + p.key + "' declares " + std::to_string(numel) + " " + dtype + " elements (" +
                           std::to_string(nbytes) + " bytes) but its record holds " +
                           std::to_string(r->entry->uncompressed_size) + " bytes",
                "torch.load before 2.10 (a storage larger than its data: out-of-bounds memory)");
      }
    }
  }

  // A torch.save file's data/ records that no persistent id names: torch.save
  // writes exactly the storages its pickle names, so another one is there for
  // a reader that takes it for one (a key the loader decodes otherwise than
  // that reader: UNICODE's Latin-1 "Ã©" beside "é").
  void check_unnamed_storages(const TorchArchive& archive, const PickleScan& scan, const std::string& where) {
    std::set<const Record*> named;
    for (const PicklePersistentId& p : scan.persistent_ids) {
      if (const Record* r = p.key.empty() ? nullptr : archive.find("data/" + p.key)) named.insert(r);
    }
    for (const Record& r : archive.records()) {
      // Any case: libtorch finds data/KEY whatever case the record spells.
      if (!starts_with(ascii_lowered(r.name), "data/") || named.count(&r) > 0) continue;
      crafted(r.name, "is a storage record that no persistent id of " + where + " names, which torch.save never "
              "writes",
              "readers that take it for a storage of the file (a key read otherwise than torch.load reads it)");
    }
  }

  // `python_data`: data.pkl as torch.load reads it when the archive has no
  // record named exactly constants.pkl (torch.load's own test for TorchScript,
  // case-sensitive, where torch.jit.load's lookups ignore case): Python's pickle.
  void torchscript_loaders(const TorchArchive& archive, const PickleScan* python_data) {
    scan_code(archive);
    const bool checkpoint_name = checkpoint_extension();
    std::string why = "TorchScript's unpickler resolves " + std::to_string(out_.globals.size()) + " global(s)";
    if (!custom_classes_.empty()) why += "; custom classes needing their library: " + join(custom_classes_);
    add_loader("torch.jit.load", runs_code() ? "runs code" : "accepts", why);
    const bool old = version_before(out_.torch_version, 2, 6);
    if (python_data != nullptr) {
      const std::string refusal = weights_only_refusal();
      add_loader("torch.load(weights_only=True)", refusal.empty() ? "accepts" : "refuses",
                 refusal.empty() ? "unpickles data.pkl under its allowlist (no record named exactly constants.pkl)"
                                 : refusal);
      add_loader("torch.load(weights_only=False)", has_unlisted() ? "runs code" : "accepts",
                 "no record is named exactly constants.pkl, torch.load's test for TorchScript: it unpickles data.pkl "
                 "with Python's pickle, not TorchScript's");
    } else {
      add_loader("torch.load(weights_only=True)", old ? "runs code" : "refuses",
                 old ? "PyTorch before 2.6 hands a TorchScript archive to torch.jit.load (CVE-2025-32434)"
                     : "a TorchScript archive: torch.load refuses it under weights_only=True");
      add_loader("torch.load(weights_only=False)", "runs code", "hands a TorchScript archive to torch.jit.load");
    }
    if (checkpoint_name) {
      crafted("the file", "a TorchScript archive under a checkpoint's name (" + extension() +
                              "), which torch.load takes: torch.load(weights_only=True) runs its TorchScript",
              "PyTorch before 2.6 (CVE-2025-32434)");
    }
  }

  // code/: operators that touch files, custom operators and classes. The
  // names are read as TorchScript's compiler reads them (code_dotted_names),
  // so spacing, comments and getattr(torch, "save") do not hide a call.
  void scan_code(const TorchArchive& archive) {
    for (const Record& r : archive.records()) {
      // Any case: libtorch finds code/x.py whatever case the record spells.
      if (r.kind != RecordKind::Code || !ends_with_ignoring_case(r.name, ".py")) continue;
      const std::string code = archive.read(r, ReadLimits::kCode);
      for (const std::string& name : code_dotted_names(code)) code_name(r.name, name);
    }
  }
  // bytecode.pkl: the mobile loader (_load_for_lite_interpreter) runs the
  // operators each method's table names, whatever code/ says: every string
  // of the pickle spelled as an operator ("aten::save", "myns::op") is judged
  // as code naming it would be.
  void scan_bytecode_operators(const std::string& bytes, const std::string& where) {
    PickleGraph graph;
    try {
      graph = parse_pickle(bytes, where);
    } catch (const Error&) {
      return;  // the ZIP checks refuse a bytecode.pkl their reader does not take
    }
    std::set<std::string> seen;
    for (PickleRef ref = 0; ref < graph.size(); ++ref) {
      const PickleNode& n = graph.at(ref);
      if (n.kind != PickleKind::String) continue;
      const std::string_view text = graph.text(n);
      const size_t colons = text.find("::");
      if (colons == std::string_view::npos || colons == 0 || colons + 2 >= text.size() ||
          !operator_name_part(text.substr(0, colons)) || !operator_name_part(text.substr(colons + 2))) {
        continue;
      }
      if (seen.size() >= kMaxListedNames || !seen.insert(std::string(text)).second) continue;
      code_name(where, "ops." + std::string(text.substr(0, colons)) + "." + std::string(text.substr(colons + 2)));
    }
  }
  static bool operator_name_part(std::string_view s) {
    if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
    return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  }

  // "a.b.c" as {"a", "b", "c"}, views of `name`.
  static std::vector<std::string_view> dotted_parts(std::string_view name) {
    std::vector<std::string_view> parts;
    for (size_t at = 0; at <= name.size();) {
      const size_t dot = std::min(name.find('.', at), name.size());
      parts.push_back(name.substr(at, dot - at));
      at = dot + 1;
    }
    return parts;
  }

  // What TorchScript's compiler makes of a dotted name (its BuiltinModule):
  // torch.X is aten::X, ops.NS.X and torch.ops.NS.X are NS::X, and an
  // `autograd` anywhere after the root goes back to aten (torch.autograd.X,
  // ops.NS.autograd.X are aten::X); torch.classes.NS.C and
  // __torch__.torch.classes.NS.C are custom classes. A module itself used as a
  // value (`t = torch`, then t.save(...)) is crafted: PyTorch's printer never
  // writes one, and what is called through the alias is not followed.
  void code_name(const std::string& where, const std::string& name) {
    const std::vector<std::string_view> parts = dotted_parts(name);
    if (parts.size() >= 5 && parts[0] == "__torch__" && parts[1] == "torch" && parts[2] == "classes") {
      custom_class("torch.classes." + std::string(parts[3]) + "." + std::string(parts[4]), where);
      return;
    }
    if (parts[0] != "torch" && parts[0] != "ops") return;
    const auto autograd = std::find(parts.begin() + 1, parts.end(), "autograd");
    std::string_view ns, op;
    bool module = false;  // the name stops at a module
    if (autograd != parts.end()) {
      ns = "aten";
      module = autograd + 1 == parts.end();
      if (!module) op = *(autograd + 1);
    } else if (parts[0] == "torch" && parts.size() >= 2 && parts[1] == "classes") {
      if (parts.size() >= 4) {
        custom_class("torch.classes." + std::string(parts[2]) + "." + std::string(parts[3]), where);
        return;
      }
      module = true;
    } else if (parts[0] == "torch" && parts.size() >= 2 && parts[1] != "ops") {
      ns = "aten";
      op = parts[1];
    } else {
      const size_t at = parts[0] == "torch" ? 2 : 1;  // after torch.ops or ops
      module = parts.size() < at + 2;
      if (!module) {
        ns = parts[at];
        op = parts[at + 1];
      }
    }
    if (module) {
      crafted(where, "uses the module '" + name + "' as a value, which PyTorch's printer never writes",
              "scanners that follow calls by name: what an alias of it calls (t = torch; t.save(...)) is hidden");
      return;
    }
    operator_call(where, ns, op);
  }
  // The operator NS::OP called, by code, bytecode or a .pt2's graph.
  void operator_call(const std::string& where, std::string_view ns, std::string_view op) {
    if (ns == "aten" && (op == "from_file" || op == "save")) {
      finding(LoadRisk::Dangerous, where,
              op == "save" ? "calls torch.save (aten::save), which writes a file when the code runs"
                           : "calls torch.from_file, which maps a file (shared=True writes to it) when the code runs",
              "torch." + std::string(op), "file I/O");
      return;
    }
    if (builtin_operator_namespace(ns) || o_.operator_libraries || allowed_by_user("torch.ops." + std::string(ns), o_)) {
      return;
    }
    finding(LoadRisk::Unlisted, where,
            "calls operators of namespace '" + std::string(ns) +
                "', which a library outside libtorch defines (torch.ops.load_library)",
            "torch.ops." + std::string(ns), "");
  }
  // A call target of a .pt2's graph (Pt2Program::call_targets), which
  // torch.export.load resolves by name, attribute by attribute from torch,
  // operator or math (deserialize_operator), and the program calls when it
  // runs. torch.ops.NS.OP and torch.ops.NS.OP.OVERLOAD are the operator
  // NS::OP; the Python functions torch.export's verifier admits (2.13) pass;
  // anything else, torch.export never writes (torch.os.system resolves and
  // runs), so it is crafted.
  void export_target(const std::string& where, const std::string& target) {
    static const std::set<std::string_view> kFunctions = {
        "_operator.getitem", "_operator.add", "_operator.mul", "_operator.sub", "_operator.truediv", "_operator.ge",
        "_operator.le", "_operator.gt", "_operator.lt", "_operator.eq", "_operator.ne", "_operator.floordiv",
        "_operator.mod", "_operator.and_", "_operator.or_", "_operator.not_", "_operator.pow", "_operator.neg",
        "_operator.pos", "_operator.abs", "_operator.lshift", "_operator.rshift", "math.ceil", "math.floor",
        "math.trunc", "torch.sym_int", "torch.sym_float", "torch.sym_ite", "torch.sym_max", "torch.sym_min",
        "torch.sym_not", "torch._sym_sqrt", "torch.sym_sum", "torch.autograd.grad_mode.set_grad_enabled",
        "torch._C._set_grad_enabled", "torch.amp.autocast_mode._enter_autocast",
        "torch.amp.autocast_mode._exit_autocast", "torch.fx.experimental.symbolic_shapes.cast_symbool_to_symint_guardless",
        "torch.export.custom_ops._call_custom_autograd_function_in_pre_dispatch",
        "torch._functorch.predispatch._add_batch_dim", "torch._functorch.predispatch._remove_batch_dim",
        "torch._functorch.predispatch._vmap_increment_nesting", "torch._functorch.predispatch._vmap_decrement_nesting",
        "torch._functorch.predispatch.lazy_load_decompositions", "torch._functorch.predispatch._make_dual",
        "torch._functorch.predispatch._unpack_dual", "torch._functorch.predispatch._jvp_increment_nesting",
        "torch._functorch.predispatch._jvp_decrement_nesting", "torch._functorch.predispatch._unwrap_for_grad",
        "torch._functorch.predispatch._enter_dual_level", "torch._functorch.predispatch._exit_dual_level"};
    // aten's operators spelled as Python's special methods; any other __name__ is an attribute of the
    // namespace or packet object (torch.ops.aten.__getattr__), not an operator.
    static const std::set<std::string_view> kDunderOperators = {
        "__and__", "__or__", "__xor__", "__lshift__", "__rshift__", "__iand__", "__ior__", "__ixor__", "__ilshift__",
        "__irshift__"};
    if (kFunctions.count(target) > 0) return;
    const std::vector<std::string_view> parts = dotted_parts(target);
    const auto dunder = [](std::string_view p) { return p.rfind("__", 0) == 0; };
    const bool op = (parts.size() == 4 || parts.size() == 5) && parts[0] == "torch" && parts[1] == "ops" &&
                    std::all_of(parts.begin() + 2, parts.end(), operator_name_part) && !dunder(parts[2]) &&
                    (!dunder(parts[3]) || kDunderOperators.count(parts[3]) > 0) &&
                    (parts.size() == 4 || !dunder(parts[4]));
    if (op) {
      operator_call(where, parts[2], parts[3]);
      return;
    }
    crafted(where, "calls '" + target.substr(0, 200) + "', which torch.export never writes: torch.export.load "
            "resolves it attribute by attribute from torch, operator or math, and the program calls it when it runs",
            "torch.export.load and the module it makes; scanners that judge a .pt2 by its pickles alone");
  }

  // An expr_str outside the grammar torch.export writes (format/pt2.h): torch.export.load
  // hands it to sympy.sympify, which evaluates it with Python's eval.
  void sympy_expression(const std::string& record, const Pt2SymExprProblem& e) {
    finding(LoadRisk::Dangerous, record + ": " + e.where,
            "holds an expr_str that sympy.sympify would eval: '" + e.expr + "' (" + e.why +
                "); torch.export.load parses every SymInt, SymFloat and SymBool expression so, and torch.export "
                "writes only sympy's srepr of symbols, numbers and its own functions",
            "", "code evaluation");
  }

  // A guards_code entry outside the grammar torch.export writes (format/pt2.h):
  // ep.module() exec()s every entry as Python.
  void guard_code(const std::string& record, const Pt2SymExprProblem& e) {
    finding(LoadRisk::Dangerous, record + ": " + e.where,
            "holds guards_code that ep.module() would exec: '" + e.expr + "' (" + e.why +
                "); ep.module(), the way to run a loaded program, exec()s every ExportedProgram.guards_code entry as "
                "Python, and torch.export writes only comparisons of input sizes",
            "", "code execution");
  }

  // A graph name that FX would write into the Python it generates and exec()s.
  void python_name(const std::string& record, const Pt2SymExprProblem& e) {
    finding(LoadRisk::Dangerous, record + ": " + e.where,
            "names a graph value or attribute '" + e.expr + "' (" + e.why +
                "): torch.export.load gives FX graph nodes their names from the program unchanged, and FX writes "
                "them into the Python source of forward() that it exec()s; torch.export writes only identifiers and dotted paths of them",
            "", "code execution");
  }
  // Every text of a program (`record`) that torch.export.load or ep.module()
  // would evaluate as Python and that passes no grammar of format/pt2.h, and
  // in `read` the kinds of text judged so.
  void program_texts(const std::string& record, const std::vector<Pt2SymExprProblem>& exprs,
                     const std::vector<Pt2SymExprProblem>& guards, const std::vector<Pt2SymExprProblem>& names,
                     std::vector<std::string>& read) {
    for (const Pt2SymExprProblem& e : exprs) sympy_expression(record, e);
    if (!exprs.empty()) read.push_back(record + " (expr_str values, with sympy.sympify)");
    for (const Pt2SymExprProblem& g : guards) guard_code(record, g);
    if (!guards.empty()) read.push_back(record + " (guards_code, exec()'d by ep.module())");
    for (const Pt2SymExprProblem& n : names) python_name(record, n);
    if (!names.empty()) read.push_back(record + " (graph names, in the forward() FX exec()s)");
  }


  // Native code that an AOTInductor model's loader picks up from outside the
  // model's own folder (data/constants/, data/aotinductor/<model>.so): torch
  // never writes code there, so no --allow-global of the model vouches for it.
  void foreign_native_code(const std::string& record, const std::string& model) {
    finding(LoadRisk::Dangerous, record,
            "is native code outside model '" + model + "''s folder that AOTIModelPackageLoader (2.13) takes for the "
            "model: it extracts every record under data/constants and data/aotinductor/" + model +
            " (no slash) into the model's folder and loads the last .so (or links the .o, or compiles the .cpp "
            "with system()) it finds; torch never writes code there, and --allow-global aoti." + model +
            " does not cover it",
            "", "native code");
  }

  // A model of an AOTInductor package without a shared library: its .cpp
  // (and the flags files it is built with), which the loader compiles.
  void compiled_source(const std::string& record, const std::string& model) {
    note_unlisted("aoti." + model);
    finding(LoadRisk::Dangerous, record,
            "is compiled when torch.export.load or aoti_load_package loads the model, which has no .so: "
            "AOTIModelPackageLoader runs system() with the compiler and flags of the model's _compile_flags.json "
            "and _linker_flags.json, a shell command from the file",
            "aoti." + model, "process execution");
  }

  // The operator namespaces libtorch registers itself (1.13 and 2.13), and
  // those only 2.x's libtorch_cpu registers: the distributed collectives
  // (c10d is in both) and symmetric memory, which exported distributed
  // programs call.
  bool builtin_operator_namespace(std::string_view ns) const {
    static const std::set<std::string_view> kBuiltin = {
        "aten", "prim", "prims", "quantized", "_quantized", "quantization", "prepacked", "sparse", "mkldnn",
        "mkldnn_prepacked", "onednn", "mkl", "_caffe2", "profiler", "_test", "static_runtime", "inductor",
        "higher_order", "c10d"};
    static const std::set<std::string_view> kSince2 = {"_c10d_functional", "_c10d_functional_autograd", "symm_mem"};
    return kBuiltin.count(ns) > 0 || (kSince2.count(ns) > 0 && !version_before(out_.torch_version, 2, 0));
  }

  // Why torch.load(weights_only=True) refuses the pickles it has read so
  // far, by PyTorch's own lists; "" when it does not.
  const std::string& weights_only_refusal() const { return wo_refusal_; }

  // What stops torch.load(weights_only=True) in one pickle: it reads opcode
  // by opcode and fails at the first one outside its opcode set or the first
  // GLOBAL outside its allowlist, whichever comes first (1.13 and 2.13
  // alike), so that one is named. 2.x maps Python 2 names first (torch._utils'
  // IMPORT_MAPPING, NAME_MAPPING), then blocks modules by name.
  std::string weights_only_refusal_of(const PickleScan& scan) const {
    const bool two = !version_before(out_.torch_version, 2, 0);
    uint64_t first = UINT64_MAX;
    std::string why;
    for (size_t i = 0; i < scan.opcodes.size() && i < scan.opcode_offsets.size(); ++i) {
      if (weights_only_opcode(scan.opcodes[i], out_.torch_version)) continue;
      first = scan.opcode_offsets[i];  // first uses are in stream order
      why = "opcode " + pickle_opcode_name(scan.opcodes[i]) + " is not in its opcode set" +
            (scan.protocol > 2 ? " (a protocol " + std::to_string(scan.protocol) + " pickle)" : "");
      break;
    }
    for (const PickleImport& i : scan.imports) {
      if (i.opcode != "GLOBAL" || i.offset >= first) continue;  // other imports are opcodes outside the set
      const std::string g = i.full();
      const std::string named = two ? compat_name(g) : g;
      const std::string module = named == g ? i.module : named.substr(0, named.find('.'));
      if (two && (module == "sys" || module == "os" || module == "posix" || module == "nt")) {
        first = i.offset;
        why = "GLOBAL " + named + ": module " + module + " is blocked";
      } else if (!torch_weights_only_allows(g, out_.torch_version) &&
                 !allowed_by_user(g, o_, i.name.find('.') != std::string::npos)) {
        first = i.offset;
        why = "GLOBAL " + named + " is not an allowed global";
      }
    }
    return why;
  }

  void pickle_loaders(bool plain) {
    const std::string refusal = weights_only_refusal();
    if (!refusal.empty()) {
      add_loader("torch.load(weights_only=True)", "refuses", refusal);
    } else if (plain) {
      add_loader("torch.load(weights_only=True)", "refuses",
                 "reads the pickle under its allowlist as the legacy format's magic number, then fails: it is not one");
    } else if (memory_attack_ && version_before(out_.torch_version, 2, 10)) {
      add_loader("torch.load(weights_only=True)", "accepts",
                 "every global is allowed, but the crafted shapes above reach memory errors before 2.10");
    } else {
      add_loader("torch.load(weights_only=True)", "accepts", "every global and opcode is on its allowlist");
    }
    const std::string calls = out_.callables.empty() ? "no calls" : std::to_string(out_.callables.size()) +
                                                                        " distinct callable(s): " + join(out_.callables);
    const std::string outcome = has_unlisted() ? "runs code" : "accepts";
    add_loader(plain ? "pickle.load" : "torch.load(weights_only=False)", outcome,
               has_unlisted() ? "calls what the allowlist does not know: " + join(unlisted_) : calls);
    if (plain) {
      add_loader("torch.load(weights_only=False)", outcome,
                 "reads a non-ZIP file as the legacy format: its first pickle runs before the magic number is checked");
    }
    add_loader("torch.jit.load", "refuses", "not a TorchScript archive (no code/)");
  }

  // `read_by_torch_load`: a pickle torch.load reads, in the order it reads
  // them (not one hidden after another's STOP).
  void record(const PickleScan& scan, const std::string& where, PickleRole role, bool read_by_torch_load = true) {
    if (read_by_torch_load && wo_refusal_.empty() &&
        (role == PickleRole::TorchSave || role == PickleRole::Legacy || role == PickleRole::LegacyTar ||
         role == PickleRole::Plain)) {
      wo_refusal_ = weights_only_refusal_of(scan);
    }
    for (const PickleImport& i : scan.imports) {
      const std::string g = i.full();
      if (out_.globals.size() < kMaxListedNames && seen_globals_.insert(g).second) out_.globals.push_back(g);
      if (!tensor_rebuilding_global(g)) out_.tensor_rebuilding_only = false;
      // TorchScript's pickler names a custom class __torch__.torch.classes.NS.C.
      if (role == PickleRole::TorchScript && g.rfind("__torch__.torch.classes.", 0) == 0) {
        custom_class(g.substr(10), where);
        continue;
      }
      if (role == PickleRole::TorchScript && (g.rfind("__torch__.", 0) == 0 || g == "__torch__")) continue;
      if (role == PickleRole::TorchScript && g.rfind("torch.classes.", 0) == 0) {
        custom_class(g, where);
        continue;
      }
      judge(g, where, i.opcode + " at offset " + std::to_string(i.offset), "imports ",
            i.name.find('.') != std::string::npos);
    }
    for (const PickleInvoke& c : scan.calls) {
      if (out_.callables.size() < kMaxListedNames && seen_callables_.insert(c.callable).second) {
        out_.callables.push_back(c.callable);
      }
      if (c.callable_is_global) continue;  // judged as an import
      const std::string owner = c.callable.substr(0, c.callable.rfind('.'));
      // Methods of allowlisted objects (an OrderedDict's __setitem__, a Parameter's __setstate__).
      if (c.callable[0] != '<' && (is_benign_global(owner) || allowed_by_user(owner, o_) ||
                                   owner.rfind("__torch__.", 0) == 0 || owner.rfind("torch.classes.", 0) == 0)) {
        continue;
      }
      if (c.callable[0] == '<' || owner == "value" || owner.find('.') == std::string::npos) {
        out_.tensor_rebuilding_only = false;
        note_unlisted(c.callable);
        finding(LoadRisk::Dangerous, where,
                "calls " + c.callable + " (" + c.opcode + " at offset " + std::to_string(c.offset) +
                    "): a callable made at load time, as attribute chains do",
                c.callable, "attribute access (reaches any function)");
      }
    }
    for (const std::string& a : scan.anomalies) {
      const bool memory = a.rfind("SETITEM", 0) == 0 || a.rfind("APPEND", 0) == 0 || a.rfind("BUILD", 0) == 0;
      if (memory) memory_attack_ = true;
      crafted(where, a,
              memory ? "torch.load(weights_only=True) before 2.10 (memory errors on a container of the wrong type); "
                       "pickle.load runs the target's methods"
                     : "scanners that stop at the first oddity");
    }
    if (role != PickleRole::Plain) check_persistent_ids(scan, where, role);
  }

  // A shared library of the file that a loader dlopen()s, or an object file
  // it links into one (an AOTInductor package's model): native code with the
  // loader's rights, trusted only by name (--allow-global aoti.<model>).
  void native_library(const std::string& record, const std::string& name) {
    if (allowed_by_user(name, o_)) return;
    note_unlisted(name);
    finding(LoadRisk::Unlisted, record,
            ends_with(record, ".o") ? "is an object file that torch.export.load and aoti_load_package link into the "
                                      "model they compile: native code from the file, run with the loader's rights"
                                    : "is a shared library that torch.export.load and aoti_load_package load "
                                      "(dlopen): native code from the file, run with the loader's rights",
            name, "native code");
  }

  void add_loader(std::string loader, std::string outcome, std::string why) {
    out_.loaders.push_back(LoaderVerdict{std::move(loader), std::move(outcome), std::move(why)});
  }
  bool has_unlisted() const { return !unlisted_.empty(); }
  // A finding of what a loader would run (not only of a crafted shape).
  bool runs_code() const {
    return std::any_of(out_.findings.begin(), out_.findings.end(),
                       [](const LoadFinding& f) { return f.risk != LoadRisk::Crafted; });
  }
  size_t finding_count() const { return out_.findings.size(); }
  std::string unlisted_names() const { return join(unlisted_); }
  const std::string& torch_version() const { return out_.torch_version; }
  const std::string& path() const { return path_; }

 private:
  // `dotted`: the name part holds a dot, which pickle.load (protocol 4 and
  // later) follows attribute by attribute from the module: from an allowed
  // function to its __globals__, __builtins__ and on to anything.
  void judge(const std::string& g, const std::string& where, const std::string& how, const char* verb,
             bool dotted = false) {
    // A name the table calls dangerous is allowed by its exact name only, never by a wildcard.
    const std::string category = dotted ? "attribute access (reaches any function)" : dangerous_category(g);
    if (is_benign_global(g) || allowed_by_user(g, o_, dotted || !category.empty())) return;
    note_unlisted(g);
    if (!category.empty()) {
      finding(LoadRisk::Dangerous, where, std::string(verb) + g + " (" + how + "): " + category, g, category);
    } else {
      finding(LoadRisk::Unlisted, where, std::string(verb) + g + " (" + how + "), which is not on the allowlist", g, "");
    }
  }
  // `g` is torch.classes.NS.C.
  void custom_class(const std::string& g, const std::string& where) {
    const size_t dot = g.find('.', 14);
    const std::string ns = g.substr(14, dot == std::string::npos ? std::string::npos : dot - 14);
    const bool one_class = dot != std::string::npos && g.find('.', dot + 1) == std::string::npos;
    // Built into libtorch (1.13 and 2.13): packed weights, and the profiler's
    // record_function (a scripted module that uses it holds a _RecordFunction),
    // the process groups and RPC's WorkerInfo.
    static const std::set<std::string_view> kBuiltin = {"quantized", "xnnpack", "mkldnn", "onednn", "rnn",
                                                        "sparse", "profiler", "c10d", "dist_rpc"};
    if (one_class && kBuiltin.count(ns) > 0) return;
    if (g == "torch.classes.aten.OpaqueObject" && !allowed_by_user(g, o_)) {
      // libtorch_python's OpaqueObject: its __setstate__ is pickle.loads(base64.b64decode(state)).
      note_unlisted(g);
      finding(LoadRisk::Dangerous, where,
              "uses the custom class " + g + ", whose __setstate__ unpickles its state with Python's pickle.loads: "
              "a Python pickle inside the file, run by torch.jit.load, the lite loader and torch.export.load",
              g, "process execution (a pickle inside a pickle)");
      return;
    }
    if (custom_classes_.size() < kMaxListedNames &&
        std::find(custom_classes_.begin(), custom_classes_.end(), g) == custom_classes_.end()) {
      custom_classes_.push_back(g);
    }
    if (o_.operator_libraries || allowed_by_user(g, o_)) return;
    note_unlisted(g);
    finding(LoadRisk::Unlisted, where,
            "uses the custom class " + g + ": torch.jit.load needs the library that defines it, and runs its "
            "__setstate__",
            g, "native code");
  }
  void note_unlisted(const std::string& g) {
    if (unlisted_.size() < kMaxListedNames && seen_unlisted_.insert(g).second) unlisted_.push_back(g);
  }
  std::string extension() const {
    const size_t slash = path_.rfind('/');
    const size_t dot = path_.rfind('.');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
    std::string ext = path_.substr(dot);
    for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return ext;
  }
  bool checkpoint_extension() const {
    const std::string e = extension();
    return e == ".pth" || e == ".bin" || e == ".ckpt" || e == ".pkl" || e == ".pickle" || e == ".tar" || e == ".pth.tar";
  }
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 8; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > 8) s += ", ... (" + std::to_string(v.size()) + " in all)";
    return s;
  }

  const LoadSafetyOptions& o_;
  std::string path_;
  LoadSafety out_;
  std::set<std::string> seen_globals_, seen_callables_, seen_findings_, seen_unlisted_;
  bool findings_cut_ = false;
  std::string wo_refusal_;  // torch.load(weights_only=True)'s, at the first pickle that has one
  std::vector<std::string> unlisted_;
  std::vector<std::string> custom_classes_;
  bool memory_attack_ = false;
};

// torch.jit.load (miniz) and torch.export.load (its fallback to Python's
// zipfile) find a ZIP by its end record in the last 64 KiB and 22 bytes of a
// file, whatever comes before it: a legacy, tar or pickle file that ends with
// one is also a TorchScript archive or a .pt2 to them.
// Any end-record signature there counts, whatever its fields say: miniz
// reads 4 KiB chunks backwards and stops past 64 KiB only after a chunk (so
// about 69.6 KiB back), takes ZIP64 fields over the classic ones, and finds a
// central directory wherever it fits in the file.
void check_hidden_zip(const ByteSource& source, Assessor& a) {
  constexpr uint64_t kEndRecord = 22, kWindow = 80 * 1024;
  const uint64_t size = source.size();
  if (size < kEndRecord) return;
  const uint64_t from = size - std::min(size, kWindow);
  const std::string tail = source.read_string(from, static_cast<size_t>(size - from));
  const size_t at = tail.rfind("PK\x05\x06");
  if (at == std::string::npos) return;
  a.crafted("the file", "ends with a ZIP archive (an end record at offset " + std::to_string(from + at) +
                            "): torch.jit.load and torch.export.load read that archive, not what is judged here",
            "torch.jit.load, torch.export.load: they find a ZIP by its end record, wherever the file starts");
}

// Every pickle torch.export.load (PyTorch 2.13, torch/export/pt2_archive/
// _package.py) unpickles, found by the names it reads them by, not by the
// configs' use_pickle alone:
//   data/sample_inputs/<model>.pt, and a legacy data/weights/<model>.pt or
//     data/constants/<model>.pt: torch.load(weights_only=True), and on its
//     failure torch.load(weights_only=False)
//   weights and tensor_* constants with use_pickle: torch.load(weights_only=False)
//   constants named opaque_obj_*: pickle.loads, whatever use_pickle says
//   constants named custom_obj_*: torch._C._pickle_load_obj (TorchScript's unpickler)
// Bytes that torch.export.load hands to torch.load (deserialize_torch_artifact,
// _package.py's loads): a torch.save ZIP, whose data.pkl is unpickled, or the
// legacy format, whose pickles are. `role` Plain: pickle.loads of the bytes.
void judge_torch_load_bytes(Assessor& a, const std::string& bytes, const std::string& name, PickleRole role) {
  if (bytes.rfind("PK", 0) == 0 && role != PickleRole::Plain) {
    // A torch.save file inside the archive.
    const TorchArchive inner(make_memory_source(bytes, name));
    if (const Record* data = inner.find("data.pkl")) {
      a.pickle(inner.read(*data, ReadLimits::kPickle), name + ":data.pkl", role, true);
    }
  } else {
    a.pickle(bytes, name, role, true);
  }
}

// What torch.export.load's verdict says it reads: the first four, then a count.
std::string records_read(const std::vector<std::string>& read, const std::string& none) {
  if (read.empty()) return none;
  std::string why = "reads " + std::to_string(read.size()) + " record(s) as code or pickles: " + read.front();
  for (size_t i = 1; i < read.size() && i < 4; ++i) why += "; " + read[i];
  if (read.size() > 4) why += "; and " + std::to_string(read.size() - 4) + " more";
  return why;
}

void assess_pt2(const TorchArchive& archive, Assessor& a) {
  // torch.load takes any ZIP with a data.pkl for a torch.save file; torch.export never writes one.
  if (const Record* data = archive.find("data.pkl")) {
    a.crafted(data->name, "is in a .pt2, where torch.export never writes one: torch.load reads the file as a "
              "torch.save file and unpickles it",
              "torch.load; scanners that judge a .pt2 by what torch.export.load reads");
    a.pickle(archive.read(*data, ReadLimits::kPickle), data->name, PickleRole::TorchSave, true);
    a.add_loader("torch.load(weights_only=False)", a.has_unlisted() ? "runs code" : "accepts",
                 "reads the .pt2 as a torch.save file: it unpickles data.pkl");
  }
  const Pt2Contents pt2 = read_pt2(archive);
  std::set<std::string> scanned;
  std::vector<std::string> read;  // what the loader's verdict names
  const auto scan = [&](const std::string& looked_up, PickleRole role, const char* how) {
    const Record* r = archive.find(looked_up);
    if (r == nullptr || !scanned.insert(r->name).second) return;
    const std::string& name = r->name;
    if (name != looked_up) {
      a.crafted(name, "is what torch.export.load reads for '" + looked_up + "' (libtorch's lookups ignore case), "
                "which no writer names so",
                "scanners and tools that look records up by their exact name");
    }
    read.push_back(name + " (" + how + ")");
    judge_torch_load_bytes(a, archive.read(*r, ReadLimits::kPickle), name, role);
  };
  const auto base_name = [](const std::string& record) { return record.substr(record.rfind('/') + 1); };
  for (const Pt2Program& p : pt2.programs) {
    scan("data/sample_inputs/" + p.name + ".pt", PickleRole::Pt2Payload, "torch.load, weights_only=False on refusal");
    scan("data/weights/" + p.name + ".pt", PickleRole::Pt2Payload, "legacy weights: torch.load, weights_only=False on refusal");
    scan("data/constants/" + p.name + ".pt", PickleRole::Pt2Payload,
         "legacy constants: torch.load, weights_only=False on refusal");
    for (const Pt2Payload& w : p.weights) {
      if (w.use_pickle) scan(w.record, PickleRole::Pt2Payload, "torch.load(weights_only=False)");
    }
    for (const Pt2Payload& c : p.constants) {
      const std::string file = base_name(c.record);
      if (file.rfind("opaque_obj_", 0) == 0) {
        scan(c.record, PickleRole::Plain, "pickle.loads");
      } else if (file.rfind("custom_obj_", 0) == 0) {
        scan(c.record, PickleRole::TorchScript, "torch._C._pickle_load_obj");
      } else if (c.use_pickle) {
        scan(c.record, PickleRole::Pt2Payload, "torch.load(weights_only=False)");
      }
    }
  }
  for (const Pt2Program& p : pt2.programs) {
    a.program_texts(p.record, p.unsafe_sym_exprs, p.unsafe_guards, p.unsafe_names, read);
  }
  bool graph_calls = false;  // a target the module calls is a finding
  for (const Pt2Program& p : pt2.programs) {
    const size_t before = a.finding_count();
    for (const std::string& target : p.call_targets) a.export_target(p.record, target);
    if (a.finding_count() > before) {
      graph_calls = true;
      read.push_back(p.record + " (its graph's call targets, when the module runs)");
    }
  }
  // AOTIModelPackageLoader (2.13), for model m, extracts every record whose
  // name starts with data/aotinductor/<m> (no slash: data/aotinductor/<m>2/
  // and data/aotinductor/<m>.so too) or data/constants, copies the constants
  // into the model's folder, and loads the last .so it saw; only without one
  // it compiles the last .cpp with the .o files: system(compiler + ...) with
  // the compiler and flags of <cpp>_compile_flags.json and _linker_flags.json.
  // Code in the model's folder is the model's (--allow-global aoti.<m>), in
  // another model's folder that model's, anywhere else no model's.
  std::set<std::string> models;
  for (const Pt2AotiModel& m : pt2.aoti) models.insert(m.name);
  const auto folder_model = [&](const std::string& record) -> std::string {
    static constexpr std::string_view kAotiFolder = "data/aotinductor/";
    if (!starts_with(record, kAotiFolder)) return {};
    const size_t slash = record.find('/', kAotiFolder.size());
    if (slash == std::string::npos) return {};
    const std::string model = record.substr(kAotiFolder.size(), slash - kAotiFolder.size());
    return models.count(model) > 0 ? model : std::string();
  };
  const auto compiled = [](const std::string& n) {
    return ends_with(n, ".cpp") || ends_with(n, "_compile_flags.json") || ends_with(n, "_linker_flags.json");
  };
  std::set<std::string> judged;
  for (const Pt2AotiModel& m : pt2.aoti) {
    std::vector<const Record*> picked;
    for (const Record& r : archive.records()) {
      if (starts_with(r.name, "data/aotinductor/" + m.name) || starts_with(r.name, "data/constants")) {
        picked.push_back(&r);
      }
    }
    const bool library = std::any_of(picked.begin(), picked.end(), [](const Record* r) { return ends_with(r->name, ".so"); });
    for (const Record* r : picked) {
      const bool native = ends_with(r->name, ".so") || ends_with(r->name, ".o");
      if (!native && (library || !compiled(r->name))) continue;
      const std::string owner = folder_model(r->name);
      if (owner.empty()) {
        a.foreign_native_code(r->name, m.name);
      } else if (native) {
        a.native_library(r->name, "aoti." + owner);
      } else {
        a.compiled_source(r->name, owner);
      }
      if (!judged.insert(r->name).second) continue;
      read.push_back(r->name + (ends_with(r->name, ".so") ? " (dlopen)" : native ? " (linked)" : " (compiled with system())"));
    }
  }
  const std::string why = records_read(read, "weights and constants are raw tensors; no pickle is read");
  a.add_loader("torch.export.load", a.has_unlisted() || a.runs_code() || graph_calls ? "runs code" : "accepts", why);
  a.add_loader("torch.jit.load", "refuses", "a .pt2 is not a TorchScript archive");
}

// Whether a ZIP's first record is at its root, by its local header (the ZIP
// checks refuse a file whose central directory names that record otherwise).
bool first_record_at_root(const ByteSource& source) {
  unsigned char header[30] = {};
  if (source.size() < sizeof header) return false;
  source.read_at(0, header, sizeof header);
  if (std::memcmp(header, "PK\x03\x04", 4) != 0) return false;
  const size_t length = header[26] | (size_t(header[27]) << 8);
  const std::string name = source.read_string(30, static_cast<size_t>(std::min<uint64_t>(length, source.size() - 30)));
  const size_t slash = name.find('/');
  return slash == std::string::npos || slash == 0;
}

// torch.export.load (2.13, torch/export/__init__.py) falls back to the layout
// before 2.6 when load_pt2 raises RuntimeError (PyTorchFileReader refuses a
// ZIP whose first record is not in a folder) or finds no program and no extra
// file. Python's zipfile then needs a record named exactly "version" at the
// ZIP's root, and reads by their exact names, in ZIP order:
// serialized_exported_program.json, whose expr_str go to sympy.sympify, and
// through deserialize_torch_artifact (torch.load with weights_only=True, then
// weights_only=False when that fails; nothing for empty bytes)
// serialized_state_dict.pt or .json, serialized_constants.pt or .json and
// serialized_example_inputs.pt.
LoadSafety assess_legacy_export(const ZipArchive& zip, const LoadSafetyOptions& options) {
  const std::string& path = zip.source().name();
  Assessor a(options, path);
  std::vector<std::string> read;
  for (const ZipEntry& e : zip.entries()) {
    if (e.name == "serialized_exported_program.json") {
      std::vector<Pt2SymExprProblem> guards, names;
      const std::vector<Pt2SymExprProblem> problems = pt2_unsafe_sym_exprs(
          zip.read(e, Pt2Limits::kProgramJson), e.compressed_size, e.name, path, nullptr, &guards, &names);
      a.program_texts(e.name, problems, guards, names, read);
    } else if ((e.name == "serialized_state_dict.pt" || e.name == "serialized_state_dict.json" ||
                e.name == "serialized_constants.pt" || e.name == "serialized_constants.json" ||
                e.name == "serialized_example_inputs.pt") &&
               e.uncompressed_size > 0) {
      read.push_back(e.name + " (torch.load, weights_only=False on refusal)");
      judge_torch_load_bytes(a, zip.read(e, ReadLimits::kPickle), e.name, PickleRole::Pt2Payload);
    }
  }
  a.add_loader("torch.export.load", a.has_unlisted() || a.runs_code() ? "runs code" : "accepts",
               "reads the layout before PyTorch 2.6 (records at the ZIP's root) with Python's zipfile: " +
                   records_read(read, "no pickle and no expression it would eval"));
  a.add_loader("torch.jit.load", "refuses", "its records are not inside a top folder");
  return a.finish();
}

LoadSafety assess_legacy_or_plain(const ByteSource& source, const LoadSafetyOptions& options, bool legacy) {
  Assessor a(options, source.name());
  constexpr uint64_t kMaxRead = ReadLimits::kPickle;
  const std::string bytes = source.read_string(0, static_cast<size_t>(std::min(source.size(), kMaxRead)));
  check_hidden_zip(source, a);
  const bool to_file_end = bytes.size() == source.size();
  if (!legacy) {
    a.pickle(bytes, "the pickle", PickleRole::Plain, true, to_file_end);
    a.pickle_loaders(true);
    return a.finish();
  }
  // magic number, protocol version, sys info, the object, the storage keys; then raw storages.
  static const char* kNames[] = {"magic number", "protocol version", "system info", "the object", "storage keys"};
  size_t offset = 0;
  for (int i = 0; i < 5; ++i) {
    const std::string where = std::string("legacy pickle ") + std::to_string(i + 1) + " (" + kNames[i] + ")";
    const PickleScan scan =
        a.pickle(std::string_view(bytes).substr(offset), where, PickleRole::Legacy, false, to_file_end);
    if (!scan.complete) break;
    offset += scan.end;
  }
  a.pickle_loaders(false);
  return a.finish();
}

// The pickle that starts at `at` of [begin, end) of the file, read in a
// window that grows until the pickle completes (or the range or the pickle
// limit ends): a member holds raw storage data after its small pickles.
std::string pickle_window(const ByteSource& source, uint64_t at, uint64_t end) {
  uint64_t want = 64 * 1024;
  while (true) {
    const uint64_t n = std::min({want, end - at, static_cast<uint64_t>(ReadLimits::kPickle)});
    std::string bytes = source.read_string(at, static_cast<size_t>(n));
    if (n == end - at || n == ReadLimits::kPickle) return bytes;
    const PickleScan scan = scan_pickle(bytes);
    if (scan.complete || !scan.ran_out) return bytes;
    want *= 4;
  }
}

// The legacy tar format of PyTorch 0.1-0.3, walked as torch.load's
// legacy_load reads it (torch/serialization.py, 1.13 and 2.13 alike):
//   'storages'  a pickle of the count; per storage a pickle (key, location,
//               storage class), an int64 element count and the elements;
//               then a pickle of the storage views
//   'tensors'   a pickle of the count; per tensor a pickle (key, storage id,
//               tensor class), then int32 ndim, 4 bytes, ndim sizes and
//               strides and the storage offset (int64s)
//   'pickle'    the object, whose persistent ids are storage keys
// A value that is not what torch wrote ends the walk of that member, as it
// ends torch.load; the other members are still read, for what they hold.
class LegacyTarWalk {
 public:
  LegacyTarWalk(Assessor& a, const ByteSource& source) : a_(a), source_(source) {}

  void storages(const TarMember& m) {
    Member r{m, m.data_offset};
    int64_t count = 0;
    if (!count_pickle(r, "the storage count", &count)) return;
    for (int64_t i = 0; i < count; ++i) {
      const std::string where = "storage " + std::to_string(i + 1);
      const std::optional<PickleGraph> args = triple(r, where, "(key, location, storage class)");
      if (!args) return;
      std::string dtype;
      uint64_t element = 0;
      if (!storage_dtype(args->text2(args->at(args->items(args->at(args->root()))[2])), &dtype, &element)) {
        return broken(r, where + "'s storage class is not one torch has");
      }
      uint64_t nbytes = 0;
      if (!raw(r, 8, where + "'s element count")) return;
      const uint64_t numel = little_endian(r.at - 8, 8);
      if ((numel >> 63) || mul_overflows(numel, element, &nbytes) || !raw(r, nbytes, where + "'s data")) {
        return broken(r, where + " declares " + std::to_string(numel) + " " + dtype + " elements, past the member's end");
      }
    }
    next(r, "the storage views");
  }

  void tensors(const TarMember& m) {
    Member r{m, m.data_offset};
    int64_t count = 0;
    if (!count_pickle(r, "the tensor count", &count)) return;
    for (int64_t i = 0; i < count; ++i) {
      const std::string where = "tensor " + std::to_string(i + 1);
      if (!triple(r, where, "(key, storage id, tensor class)")) return;
      if (!raw(r, 8, where + "'s dimension count")) return;
      const int32_t ndim = static_cast<int32_t>(static_cast<uint32_t>(little_endian(r.at - 8, 4)));
      if (ndim < 0 || !raw(r, 16 * static_cast<uint64_t>(ndim) + 8, where + "'s sizes and strides")) {
        return broken(r, where + " declares " + std::to_string(ndim) + " dimensions, past the member's end");
      }
    }
  }

  void object(const TarMember& m) {
    Member r{m, m.data_offset};
    next(r, "the object");
  }


 private:
  struct Member {
    const TarMember& m;
    uint64_t at;
    uint64_t end() const { return m.data_offset + m.size; }
  };

  // Scans and records the pickle at r.at, moves past it; its value when the
  // safe reader takes it (nullopt ends the walk: torch.load stops there too,
  // or the pickle does what the findings say).
  std::optional<PickleGraph> next(Member& r, const std::string& what) {
    const std::string where = "'" + r.m.name + "': " + what;
    if (r.at >= r.end()) {
      a_.crafted(where, "is missing: the member ends first", "torch.load fails there; scanners that stop early");
      return std::nullopt;
    }
    const std::string bytes = pickle_window(source_, r.at, r.end());
    const PickleScan scan = a_.pickle(bytes, where, PickleRole::LegacyTar, false);
    if (!scan.complete) return std::nullopt;
    r.at += scan.end;
    try {
      return parse_pickle(bytes, where, 0, nullptr);
    } catch (const Error&) {
      return std::nullopt;  // not plain data: the scan's findings say what it does
    }
  }
  // An entry's pickle, which torch unpacks into three names.
  std::optional<PickleGraph> triple(Member& r, const std::string& where, const std::string& shape) {
    std::optional<PickleGraph> g = next(r, where + " " + shape);
    if (!g) return std::nullopt;
    const PickleNode& root = g->at(g->root());
    if (root.kind != PickleKind::Tuple || root.items.size != 3) {
      broken(r, where + " is not the " + shape + " torch writes");
      return std::nullopt;
    }
    return g;
  }
  bool count_pickle(Member& r, const std::string& what, int64_t* count) {
    std::optional<PickleGraph> g = next(r, what);
    if (!g) return false;
    const PickleNode& n = g->at(g->root());
    if (n.kind != PickleKind::Int || n.integer < 0) {
      broken(r, what + " is not a count");
      return false;
    }
    *count = n.integer;
    return true;
  }
  bool raw(Member& r, uint64_t n, const std::string& what) {
    if (n > r.end() - r.at) {
      broken(r, what + " runs past the member's end");
      return false;
    }
    r.at += n;
    return true;
  }
  uint64_t little_endian(uint64_t at, size_t n) const {
    unsigned char b[8] = {};
    source_.read_at(at, b, n);
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | b[i];
    return v;
  }
  void broken(const Member& r, const std::string& what) {
    a_.crafted("'" + r.m.name + "'", what + " (offset " + std::to_string(r.at - r.m.data_offset) + ")",
               "torch.load fails there, after running the pickles before it; scanners that read on disagree");
  }

  Assessor& a_;
  const ByteSource& source_;
};

// What the file's first bytes do as a pickle: nothing (they fail at once, as
// a tar header does), or what pickle.load would run. An EXT1/EXT2/EXT4
// opcode before anything else acts fails there: it looks its code up in
// copyreg's extension registry, which is empty unless the loading program
// filled it ("unregistered extension code"); 3 in 256 random files start
// with one (found by bench/sign.sh: a random blob starting 82 d5 was refused
// as a pickle importing copyreg._extension_registry.213).
bool first_pickle_acts(const PickleScan& scan) {
  uint64_t first_act = UINT64_MAX, first_extension = UINT64_MAX;
  for (const PickleImport& i : scan.imports) {
    uint64_t& first = starts_with(i.opcode, "EXT") ? first_extension : first_act;
    first = std::min(first, i.offset);
  }
  for (const PickleInvoke& c : scan.calls) first_act = std::min(first_act, c.offset);
  if (first_extension < first_act) return false;
  return scan.complete || first_act != UINT64_MAX;
}

}  // namespace

LoadSafety assess_tar_load_safety(const ByteSource& source, const TarListing& tar,
                                  const LoadSafetyOptions& options) {
  Assessor a(options, source.name());
  for (const std::string& anomaly : tar.anomalies) {
    a.crafted("the tar", "has " + anomaly, "tar readers that differ from Python's tarfile (other versions, scanners)");
  }
  if (!tar.read_error.empty()) {
    a.crafted("the tar", "tarfile fails part-way: " + tar.read_error,
              "torch.load: it then reads the file as a pickle from its first byte (checked below)");
  }
  // tarfile.getmember returns the last member of a name; torch.save wrote each once, as a file.
  std::map<std::string, const TarMember*> members;
  // Duplicates and members torch.save never wrote are reported after what
  // torch.load does with the members it reads (a link says more).
  std::vector<const TarMember*> unknown, duplicates;
  for (const TarMember& m : tar.members) {
    if (m.name == "sys_info") continue;
    if (m.name != "storages" && m.name != "tensors" && m.name != "pickle") {
      unknown.push_back(&m);
      continue;
    }
    if (members.count(m.name)) duplicates.push_back(&m);
    members[m.name] = &m;
  }
  LegacyTarWalk walk(a, source);
  for (const char* name : {"storages", "tensors", "pickle"}) {
    const auto it = members.find(name);
    if (it == members.end()) {
      a.crafted("the tar", std::string("has no member '") + name + "': torch.load fails there",
                "nothing it reads after; scanners that expect it");
      continue;
    }
    const TarMember& m = *it->second;
    if (!m.read_as_file()) {
      const bool link = m.type == '1' || m.type == '2';
      a.crafted("the tar", "member '" + m.name + "' is not a file but a " + tar_type_name(m.type) +
                               (link ? " to '" + m.linkname + "'" : ""),
                "torch.load: tar.extract writes it as one, then reads the file it points to (of the archive, "
                "or of the machine)");
      continue;
    }
    if (m.name == "storages") walk.storages(m);
    if (m.name == "tensors") walk.tensors(m);
    if (m.name == "pickle") walk.object(m);
  }
  for (const TarMember* m : duplicates) {
    a.crafted("the tar", "has two members named '" + m->name + "': tarfile reads the last",
              "scanners that read the first; torch.load reads the last");
  }
  for (const TarMember* m : unknown) {
    a.crafted("the tar", "has a member '" + m->name.substr(0, 100) + "', which torch.save never wrote",
              "readers of what else the tar holds (an archive inside it is not judged here)");
  }
  check_hidden_zip(source, a);
  // pickle.load, and torch.load when tarfile fails: the first bytes as a pickle.
  const std::string head = pickle_window(source, 0, source.size());
  const PickleScan first = scan_pickle(head);
  const bool polyglot = first_pickle_acts(first);
  if (polyglot) {
    a.crafted("the file's first bytes", "are both a tar header and a pickle that pickle.load runs",
              "pickle.load, and torch.load when tarfile fails on the file: they run this pickle instead");
    a.pickle(head, "the file's first bytes (as a pickle)", PickleRole::Plain, false);
  }
  const bool runs = a.has_unlisted();
  if (!version_before(a.torch_version(), 2, 6)) {
    a.add_loader("torch.load(weights_only=True)", "refuses",
                 "PyTorch 2.6 and later refuse the legacy .tar format under weights_only=True");
  } else {
    const std::string refusal = a.weights_only_refusal();
    a.add_loader("torch.load(weights_only=True)", refusal.empty() ? "accepts" : "refuses",
                 refusal.empty() ? "reads the tar's pickles under its allowlist, and every global and opcode is on it"
                                 : refusal);
  }
  a.add_loader("torch.load(weights_only=False)", runs ? "runs code" : "accepts",
               runs ? "calls what the allowlist does not know: " + a.unlisted_names()
                    : "reads it as the legacy tar format: the pickles of 'storages', 'tensors' and 'pickle'");
  a.add_loader("pickle.load", polyglot ? (runs ? "runs code" : "accepts") : "refuses",
               polyglot ? "the file's first bytes are a pickle too (and torch.load of the bytes in memory, "
                          "io.BytesIO, which skips the tar path, runs it)"
                        : "a tar header is not a pickle: it fails at once");
  a.add_loader("torch.jit.load", "refuses", "not a TorchScript archive (no ZIP)");
  return a.finish();
}

namespace {

}  // namespace

std::string_view load_risk_id(LoadRisk risk) {
  switch (risk) {
    case LoadRisk::None: return "none";
    case LoadRisk::Unlisted: return "unlisted";
    case LoadRisk::Dangerous: return "dangerous";
    case LoadRisk::Crafted: return "crafted";
  }
  return "none";
}

LoadRisk LoadSafety::worst() const {
  LoadRisk w = LoadRisk::None;
  for (const LoadFinding& f : findings) w = std::max(w, f.risk);
  return w;
}

std::string LoadSafety::worst_line() const {
  const LoadFinding* worst = nullptr;
  for (const LoadFinding& f : findings) {
    if (worst == nullptr || f.risk > worst->risk) worst = &f;
  }
  if (worst == nullptr) return {};
  // One line: a crafted file's 2 KB global names are cut (the report lists them whole).
  constexpr size_t kMaxLine = 400;
  std::string line = std::string(load_risk_id(worst->risk)) + ": " + worst->where + " " + worst->what;
  if (line.size() > kMaxLine) {
    size_t cut = kMaxLine;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
    line = line.substr(0, cut) + "...";
  }
  return line;
}

std::optional<LoadSafety::Acceptance> LoadSafety::acceptance() const {
  if (!unsafe()) return std::nullopt;
  Acceptance out;
  for (const LoadFinding& f : findings) {
    if (f.risk != LoadRisk::Unlisted || f.global.empty()) return std::nullopt;
    if (std::find(out.allow_globals.begin(), out.allow_globals.end(), f.global) == out.allow_globals.end()) {
      out.allow_globals.push_back(f.global);
    }
    out.load_library = out.load_library || f.global.rfind("torch.ops.", 0) == 0 ||
                       f.global.rfind("torch.classes.", 0) == 0;
  }
  return out;
}

bool torch_weights_only_allows(std::string_view g, std::string_view torch_version) {
  if (legacy_type_class(g)) return true;
  if (version_before(torch_version, 2, 0)) return torch_113_globals().count(g) > 0;  // 1.13 maps no names
  return torch_2_globals().count(compat_name(g)) > 0;
}

// Exact names only: a prefix would let "module.allowed_name.__globals__..."
// through, which protocol 4's find_class follows attribute by attribute.
bool is_benign_global(std::string_view g) {
  const auto listed = [](std::string_view n) {
    return legacy_type_class(n) || torch_2_globals().count(n) > 0 || torch_113_globals().count(n) > 0 ||
           extra_benign_globals().count(n) > 0;
  };
  return listed(g) || listed(compat_name(g));
}

std::string dangerous_category(std::string_view g) {
  const std::string mapped = compat_name(g);
  // pathlib's path classes make a path from strings and touch no file (what
  // would, a method call, needs attribute access, judged on its own): a value
  // Lightning checkpoints hold, unlisted like any class beyond the allowlist.
  static const std::set<std::string_view> kPathValues = {"pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath",
                                                         "pathlib.PurePosixPath", "pathlib.WindowsPath",
                                                         "pathlib.PureWindowsPath"};
  if (kPathValues.count(g) > 0) return {};
  for (const Danger& d : kDangers) {
    const std::string_view p = d.prefix;
    if (g.rfind(p, 0) == 0 || std::string_view(mapped).rfind(p, 0) == 0) return d.category;
  }
  return {};
}

// A safetensors file: an 8-byte little-endian header size N, then N bytes of
// JSON from '{' within the file. One whose N is 0x380 (896) starts 80 03, as
// a protocol 3 pickle does; pickle.load fails on it at its third byte (0x00
// is no opcode) before doing anything.
namespace {
bool is_safetensors_layout(const ByteSource& source) {
  if (source.size() < 9) return false;
  unsigned char head[9] = {};
  source.read_at(0, head, sizeof head);
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | head[i];
  return head[8] == '{' && header >= 2 && header <= source.size() - 8;
}
}  // namespace

// What pickle.load does with the file decides: a pickle that completes, or
// one that imports or calls something before it fails, is a pickle; bytes
// that fail before doing anything (text, most binary files) are not. One
// that states a protocol (PROTO 0-5) is a pickle also when it is cut short
// or fails past its first opcodes (damaged, or crafted), unless it is laid
// out as a safetensors file. The first MiB decides, unless the pickle runs
// on past it.
bool looks_like_pickle(const ByteSource& source) {
  constexpr uint64_t kSniff = 1 << 20;
  const uint64_t n = std::min(source.size(), kSniff);
  if (n == 0) return false;
  unsigned char head[2] = {};
  source.read_at(0, head, std::min<uint64_t>(n, 2));
  if (head[0] == 0x80 && (n < 2 || head[1] > 5)) return false;
  PickleScan scan = scan_pickle(source.read_string(0, static_cast<size_t>(n)));
  if (!scan.complete && scan.ran_out && n < source.size()) {
    scan = scan_pickle(source.read_string(0, static_cast<size_t>(std::min<uint64_t>(source.size(), ReadLimits::kPickle))));
  }
  if (first_pickle_acts(scan)) return true;
  // A protocol 2+ pickle starts 80 0N (PROTO): one that is whole, cut short,
  // or fails past its first opcodes is a pickle, damaged or crafted. So do 1
  // in 11,000 files of random bytes (a raw weights blob, an encrypted file):
  // pickle.load fails on their next bytes, having done nothing, and so they
  // are not (found by bench/sign.sh: a random .safetensors-named blob was
  // refused as a crafted pickle). Nor is safetensors whose header size
  // happens to read 80 0N.
  constexpr uint64_t kPastItsStart = 8;
  return head[0] == 0x80 && !is_safetensors_layout(source) &&
         (scan.complete || scan.ran_out || scan.end >= kPastItsStart);
}
LoadSafety assess_archive_load_safety(const TorchArchive& archive, const LoadSafetyOptions& options) {
  Assessor a(options, archive.path());
  switch (archive.kind()) {
    case FileKind::TorchSave: {
      const Record* data = archive.find("data.pkl");
      const std::string bytes = archive.read(*data, ReadLimits::kPickle);
      const PickleScan scan = a.pickle(bytes, "data.pkl", PickleRole::TorchSave, true);
      a.check_storages(archive, scan, "data.pkl", "data");
      a.check_unnamed_storages(archive, scan, "data.pkl");
      a.pickle_loaders(false);
      break;
    }
    case FileKind::TorchScript:
    case FileKind::LiteInterpreter: {
      for (const char* name : {"data.pkl", "constants.pkl", "bytecode.pkl"}) {
        if (const Record* r = archive.find(name)) {
          const std::string bytes = archive.read(*r, ReadLimits::kPickle);
          const PickleScan scan = a.pickle(bytes, name, PickleRole::TorchScript, true);
          if (std::strcmp(name, "data.pkl") == 0) a.check_storages(archive, scan, name, "data");
          if (std::strcmp(name, "constants.pkl") == 0) a.check_storages(archive, scan, name, "constants");
          if (std::strcmp(name, "bytecode.pkl") == 0) a.scan_bytecode_operators(bytes, r->name);
        }
      }
      // torch.load takes a ZIP for TorchScript only when a record is named
      // exactly constants.pkl; else it unpickles data.pkl as a torch.save file.
      std::optional<PickleScan> python_data;
      if (std::none_of(archive.records().begin(), archive.records().end(),
                       [](const Record& r) { return r.name == "constants.pkl"; })) {
        if (const Record* folded = archive.find("constants.pkl")) {
          a.crafted(folded->name, "is what torch.jit.load reads for constants.pkl (its lookups ignore case), but "
                    "torch.load looks for the exact name: it takes the file for a torch.save file and unpickles "
                    "data.pkl with Python's pickle",
                    "torch.load; scanners that judge the file as TorchScript alone");
        }
        if (const Record* data = archive.find("data.pkl")) {
          python_data = a.pickle(archive.read(*data, ReadLimits::kPickle), data->name + " (as torch.load reads it)",
                                 PickleRole::TorchSave, true);
        }
      }
      // A .pt2's records beside TorchScript's: torch.export.load reads the file as a .pt2.
      for (const char* pt2 : {"archive_format", "models/model.json", "serialized_exported_program.json"}) {
        if (const Record* r = archive.find(pt2)) {
          a.crafted(r->name, "makes the TorchScript archive a .pt2 as well: torch.export.load reads what is not "
                    "judged here as TorchScript (sample inputs, constants, compiled code)",
                    "torch.export.load; scanners that judge a file by one kind");
          break;
        }
      }
      a.torchscript_loaders(archive, python_data ? &*python_data : nullptr);
      break;
    }
    case FileKind::ExportedProgram: assess_pt2(archive, a); break;
    case FileKind::TorchPackage: return assess_torch_package(archive, options);
    default: break;
  }
  LoadSafety out = a.finish();
  // PackageImporter needs only .data/extern_modules: a torch.save (or other)
  // archive that holds it is a torch.package too, and that reader runs its modules.
  if (archive.kind() != FileKind::OtherZip && archive.find(".data/extern_modules") != nullptr) {
    add_package_importer_view(archive, options, out);
  }
  return out;
}

std::optional<LoadSafety> assess_legacy_export_load_safety(const ByteSource& source, const LoadSafetyOptions& options) {
  if (!first_record_at_root(source)) return std::nullopt;
  const ZipArchive zip(borrow_source(source));
  const bool version = std::any_of(zip.entries().begin(), zip.entries().end(),
                                   [](const ZipEntry& e) { return e.name == "version"; });
  if (!version) return std::nullopt;
  return assess_legacy_export(zip, options);
}

namespace {

// A name as text: its NUL bytes as "\0".
std::string shown_name(const std::string& name) {
  std::string out;
  for (char c : name) out += c == '\0' ? std::string("\\0") : std::string(1, c);
  return out.size() > 200 ? out.substr(0, 200) + "..." : out;
}

// Where AOTIModelPackageLoader writes a record it extracts to
// <temporary folder>/<name> without resolving '..'; "" when that stays inside.
std::string aoti_extraction_escape(const std::string& name) {
  std::vector<std::string> parts;
  size_t ups = 0;
  size_t start = 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    if (slash == std::string::npos) slash = name.size();
    const std::string part = name.substr(start, slash - start);
    if (part == "..") {
      if (parts.empty()) {
        ups += 1;
      } else {
        parts.pop_back();
      }
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    start = slash + 1;
  }
  if (ups == 0) return {};
  std::string rest;
  for (const std::string& p : parts) rest += (rest.empty() ? "" : "/") + p;
  std::string where = "<its temporary folder>/";
  for (size_t i = 0; i < std::min<size_t>(ups, 3); ++i) where += "../";
  if (ups > 3) where += "(" + std::to_string(ups) + " '..' in all)/";
  where += rest;
  // The folder is /tmp/<random> (create_temp_dir): two levels up is the root, and '..' stays there.
  if (ups >= 2) where += " (/" + rest + " when that folder is /tmp/<name>)";
  return where;
}

}  // namespace

std::optional<RefusedZipVerdict> assess_refused_zip_names(const ByteSource& source, const LoadSafetyOptions& options) {
  const std::vector<std::string> names = read_zip_entry_names(source);
  if (names.empty()) return std::nullopt;
  // Python's zipfile's view: each name cut at its first NUL.
  std::vector<std::string> cut;
  cut.reserve(names.size());
  for (const std::string& n : names) cut.push_back(n.substr(0, n.find('\0')));
  // torch.export's layout before 2.6 (records at the root, "version" among them), read by zipfile;
  // else PyTorchFileReader's, every record under one folder.
  const bool root_layout = cut.front().find('/') == std::string::npos &&
                           std::find(cut.begin(), cut.end(), "version") != cut.end();
  const size_t slash = cut.front().find('/');
  const std::string prefix = root_layout || slash == std::string::npos ? "" : cut.front().substr(0, slash + 1);
  std::unordered_map<std::string, size_t> count;
  std::unordered_map<std::string, bool> rel;  // names under the prefix
  for (const std::string& n : cut) {
    count[n] += 1;
    if (n.compare(0, prefix.size(), prefix) == 0) rel[n.substr(prefix.size())] = true;
  }
  const auto has = [&](const char* r) { return rel.count(r) > 0; };
  RefusedZipVerdict out;
  if (root_layout || has("archive_format") || has("models/model.json") || has("serialized_exported_program.json")) {
    out.kind = FileKind::ExportedProgram;
  } else if (has("bytecode.pkl")) {
    out.kind = FileKind::LiteInterpreter;
  } else if (has("constants.pkl")) {
    out.kind = FileKind::TorchScript;
  } else if (has("data.pkl")) {
    out.kind = FileKind::TorchSave;
  } else if (has(".data/extern_modules")) {
    out.kind = FileKind::TorchPackage;
  }
  const std::string zipfile_readers = root_layout
      ? "torch.export.load (Python's zipfile reads the layout before PyTorch 2.6, then torch.load(weights_only=False) "
        "of its serialized_*.pt); scanners that refuse or skip the name"
      : "Python's zipfile and the loaders that use it; scanners that refuse or skip the name";
  Assessor a(options, source.name());
  std::unordered_map<std::string, bool> reported;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    if (n.find('\0') != std::string::npos) {
      a.crafted(shown_name(n), "has a NUL byte in its name: Python's zipfile cuts the name there and reads this "
                "record as '" + cut[i] + "', which tsarchive's checks never read",
                zipfile_readers);
    }
    if (count[cut[i]] > 1 && !reported[cut[i]]) {
      reported[cut[i]] = true;
      a.crafted(shown_name(cut[i]), "is the name of " + std::to_string(count[cut[i]]) + " entries: Python's zipfile "
                "reads the last of them, miniz (libtorch's reader) whichever its sorted index finds, and tsarchive's "
                "checks read none",
                root_layout ? zipfile_readers
                            : "torch.load, torch.jit.load, torch.export.load (miniz); Python's zipfile; scanners "
                              "that read the first entry of a name");
    }
    if (!root_layout && cut[i].compare(0, prefix.size() + 17, prefix + "data/aotinductor/") == 0) {
      const std::string escape = aoti_extraction_escape(n);
      if (!escape.empty()) {
        a.crafted(shown_name(n), "has '..' parts: AOTIModelPackageLoader (torch.export.load, "
                  "torch._inductor.aoti_load_package) extracts every record under data/aotinductor/ to <its "
                  "temporary folder>/<name> without resolving them, before any check, so it writes this record "
                  "at " + escape + ", outside that folder (a .pth file in site-packages runs at the next Python start)",
                  "torch.export.load and aoti_load_package (PyTorch 2.6 and later)");
      }
    }
  }
  out.safety = a.finish();
  if (out.safety.findings.empty()) return std::nullopt;
  out.safety.tensor_rebuilding_only = false;
  return out;
}

LoadSafety assess_load_safety(const ByteSource& source, const LoadSafetyOptions& options) {
  const FileKind kind = detect_file_kind(source);
  if (kind == FileKind::OtherZip) {
    try {
      if (std::optional<LoadSafety> legacy = assess_legacy_export_load_safety(source, options)) return std::move(*legacy);
      const TorchArchive archive(borrow_source(source));
      return assess_archive_load_safety(archive, options);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::BadInput) throw;
      std::optional<RefusedZipVerdict> names = assess_refused_zip_names(source, options);
      if (!names) throw;
      return std::move(names->safety);
    }
  }
  if (kind == FileKind::LegacyTorchSave) return assess_legacy_or_plain(source, options, true);
  if (kind == FileKind::LegacyTar) {
    if (const std::optional<TarListing> tar = list_tar(source)) return assess_tar_load_safety(source, *tar, options);
  }
  if (kind == FileKind::NotAModel && looks_like_pickle(source)) return assess_legacy_or_plain(source, options, false);
  LoadSafety none;
  none.torch_version = options.torch_version.empty() ? kNewestTorchVersion : options.torch_version;
  return none;
}

}  // namespace tsarchive
