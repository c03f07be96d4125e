#include "core/inspect/inspect.h"

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "format/pickle.h"
#include "base/utf8.h"

namespace tsarchive {
namespace {

constexpr uint64_t kExtraReadLimit = 1ull << 30;

void read_version_records(const TorchArchive& archive, InspectReport& report) {
  const TorchArchive::Version v = archive.format_version();
  report.format_version = v.value;
  report.version_record = v.record;
  if (auto b = archive.read_optional("byteorder", ReadLimits::kSmall)) report.byteorder = *b;
  if (auto id = archive.read_optional(".data/serialization_id", ReadLimits::kSmall)) report.serialization_id = *id;
  // PyTorchStreamReader reads .data/version and never looks at version; no
  // writer makes the two differ, so a file where they do was altered.
  const auto old_style = archive.read_optional("version", ReadLimits::kSmall);
  const auto new_style = archive.read_optional(".data/version", ReadLimits::kSmall);
  const auto strip = [](std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    return s;
  };
  if (old_style && new_style && strip(*old_style) != strip(*new_style)) {
    report.problems.push_back("the version records disagree: 'version' says " + strip(*old_style) +
                              ", '.data/version' says " + strip(*new_style));
  }
  if (report.byteorder && *report.byteorder != "little" && *report.byteorder != "big") {
    report.problems.push_back("byteorder record holds '" + *report.byteorder + "', expected little or big");
  }
}

std::vector<CodeClass> read_classes(const TorchArchive& archive) {
  std::vector<CodeClass> classes;
  for (const Record& r : archive.records()) {
    if (r.kind != RecordKind::Code) continue;
    if (r.name.size() < 3 || r.name.compare(r.name.size() - 3, 3, ".py") != 0) continue;
    const std::string source = archive.read(r, ReadLimits::kCode);
    if (!is_printable_utf8(source)) {
      throw_bad_input("code record '" + r.name + "' is not UTF-8 text", archive.path(), "the archive is damaged");
    }
    CodeFile file = parse_torchscript_code(source, r.name);
    for (CodeClass& c : file.classes) classes.push_back(std::move(c));
  }
  return classes;
}

PickleGraph read_pickle(const TorchArchive& archive, const Record& r) {
  try {
    return parse_pickle(archive.read(r, ReadLimits::kPickle), r.name);
  } catch (const Error& e) {
    throw e.with_file(archive.path());
  }
}

void check_storage_records(const TorchArchive& archive, const ModelContents& model, InspectReport& report) {
  // Every storage record should be reached by a tensor of the pickles: one
  // that is not is either something this reader does not understand or
  // bytes nothing loads. Lite archives share storages with bytecode.pkl, which
  // is not walked, so they are left out.
  if (report.kind == FileKind::TorchScript || report.kind == FileKind::TorchSave) {
    std::vector<std::string> unreached;
    for (const Record& r : archive.records()) {
      if ((r.kind == RecordKind::TensorData || r.kind == RecordKind::ConstantData) && model.storages.count(r.name) == 0) {
        unreached.push_back(r.name);
      }
    }
    if (!unreached.empty()) {
      std::string names;
      for (size_t i = 0; i < unreached.size() && i < 5; ++i) names += (i ? ", " : "") + unreached[i];
      if (unreached.size() > 5) names += ", ...";
      report.notes.push_back(std::to_string(unreached.size()) + " storage record(s) that no tensor of the pickles "
                             "reaches (" + names + "): not counted among the tensors");
    }
  }
  for (const auto& [name, storage] : model.storages) {
    const Record* r = archive.find(name);
    if (r == nullptr) {
      report.problems.push_back("storage record '" + name + "' is missing");
    } else if (r->entry->uncompressed_size < storage.nbytes) {
      report.problems.push_back("storage record '" + name + "' holds " + std::to_string(r->entry->uncompressed_size) +
                                " bytes but its " + storage.dtype + " storage needs " + std::to_string(storage.nbytes));
    }
  }
}

// The first class under __torch__ that a pickle names: torch.load cannot
// import that module (it exists only inside torch.jit.load, made from code/).
std::string first_torchscript_class(const PickleGraph& g) {
  for (size_t i = 0; i < g.size(); ++i) {
    const PickleNode& n = g.at(static_cast<PickleRef>(i));
    if (n.kind != PickleKind::Global) continue;
    const std::string_view module = g.text(n);
    if (module == "__torch__" || module.rfind("__torch__.", 0) == 0) return g.global_name(n);
  }
  return {};
}

// bytecode.pkl: (version, (method tuples)...)
std::optional<int64_t> bytecode_version(const TorchArchive& archive) {
  const Record* r = archive.find("bytecode.pkl");
  if (r == nullptr) return std::nullopt;
  const PickleGraph g = read_pickle(archive, *r);
  const PickleNode& root = g.at(g.root());
  const auto items = g.items(root);
  if (root.kind == PickleKind::Tuple && !items.empty() && g.at(items[0]).kind == PickleKind::Int) {
    return g.at(items[0]).integer;
  }
  return std::nullopt;
}

// PythonPrint (PyTorch 1.6 and later) gives every Module class both lists and
// no other unannotated class-level assignment. Writers up to 1.5 left out
// `__buffers__` (and before 1.2 `__parameters__` too); libtorch still loads
// such classes, their tensors as plain attributes, so a missing list is a
// note, not damage. An unknown assignment is: torch::jit::load of 1.13
// SEGFAULTs on a renamed list (testdata/hostile/renamed_*.pt), so the gate
// must refuse it.
void check_module_classes(const std::vector<CodeClass>& classes, std::vector<std::string>& problems,
                          std::vector<std::string>& notes) {
  size_t without_parameters = 0, without_buffers = 0;
  for (const CodeClass& c : classes) {
    if (c.base != "Module") continue;
    const std::string where = "class " + c.qualified_name + " in '" + c.record + "'";
    without_parameters += c.declares_parameters ? 0 : 1;
    without_buffers += c.declares_buffers ? 0 : 1;
    for (const std::string& name : c.other_assignments) {
      problems.push_back(where + " assigns '" + name + "', which TorchScript never writes");
    }
  }
  if (without_parameters + without_buffers == 0) return;
  std::string lists = without_parameters > 0 && without_buffers > 0 ? "__parameters__ or __buffers__"
                      : without_parameters > 0                      ? "__parameters__"
                                                                    : "__buffers__";
  notes.push_back(std::to_string(std::max(without_parameters, without_buffers)) + " module class(es) declare no " +
                  lists + " list, as PyTorch 1.5 and older wrote them: libtorch loads those tensors as plain "
                  "attributes");
}

void summarise_contents(ModelContents& model, InspectReport& report) {
  std::map<std::string, DtypeTotal> totals;
  for (const TensorInfo& t : model.tensors) {
    DtypeTotal& d = totals[t.dtype];
    d.dtype = t.dtype;
    d.tensors += 1;
    d.elements += t.numel;
    d.bytes += t.nbytes;
    if (t.role == TensorRole::Parameter) report.parameter_count += t.numel;
  }
  for (auto& [_, d] : totals) report.dtype_totals.push_back(d);
  report.storages.reserve(model.storages.size());
  for (auto& [_, s] : model.storages) {
    report.tensor_bytes += s.nbytes;
    report.storages.push_back(std::move(s));
  }
  report.tensors = std::move(model.tensors);
  report.modules = std::move(model.modules);
  for (std::string& p : model.problems) report.problems.push_back(std::move(p));
}

}  // namespace

void inspect_archive(const TorchArchive& archive, InspectReport& report) {
  report.is_zip = true;
  report.kind = archive.kind();
  report.top_folder = archive.top_folder();
  if (report.kind == FileKind::OtherZip) {
    throw_bad_input("a ZIP archive, but not a PyTorch one: it has no data.pkl or code/ records", report.path,
                    "give a file written by torch.jit.save, torch.save or torch.export.save");
  }
  for (const Record& r : archive.records()) {
    const ZipEntry& e = *r.entry;
    RecordInfo info{r.name, r.kind, e.uncompressed_size, e.compressed_size, e.method, e.data_offset, e.crc32,
                    e.data_offset % 64 == 0};
    report.total_size += e.uncompressed_size;
    report.compressed_size += e.compressed_size;
    if (r.kind == RecordKind::TensorData || r.kind == RecordKind::ConstantData) {
      report.tensor_records += 1;
      report.tensor_records_stored += e.stored() ? 1 : 0;
      report.tensor_records_aligned += e.stored() && info.aligned ? 1 : 0;
    }
    report.records.push_back(std::move(info));
  }
  read_version_records(archive, report);
  report.extra_files = list_extra_files(archive);
  report.signature = describe_embedded_signature(archive);
  if (archive.find(extra_record_name(kRunCheckName)) != nullptr) {
    try {
      report.run_check = parse_run_check(read_extra(archive, kRunCheckName, 1 << 20), report.path);
    } catch (const Error& e) {
      report.problems.push_back(e.what());
    }
  }

  ModelContents model;
  if (report.kind == FileKind::TorchScript || report.kind == FileKind::LiteInterpreter) {
    TorchScriptModel contents = read_torchscript_model(archive);
    report.classes = std::move(contents.classes);
    check_module_classes(report.classes, report.problems, report.notes);
    if (archive.find("constants.pkl") == nullptr) {
      report.problems.push_back("constants.pkl is missing (torch::jit::load needs it, even when empty)");
    }
    model = std::move(contents.model);
    if (!model.modules.empty()) report.root_type = model.modules.front().type;
    if (report.kind == FileKind::LiteInterpreter) report.bytecode_version = bytecode_version(archive);
  } else if (report.kind == FileKind::ExportedProgram) {
    report.pt2 = read_pt2(archive);
    for (const std::string& n : report.pt2->notes) report.notes.push_back(n);
    for (const std::string& p : report.pt2->problems) report.problems.push_back(p);
    for (const Pt2Program& p : report.pt2->programs) {
      for (const Pt2Payload& w : p.weights) report.parameter_count += w.is_param && w.tensor ? w.tensor->numel.value_or(0) : 0;
    }
  } else if (report.kind == FileKind::TorchPackage) {
    report.package = read_torch_package(archive);
  } else if (report.kind == FileKind::TorchSave) {
    const PickleGraph saved = read_pickle(archive, *archive.find("data.pkl"));
    collect_saved_object(saved, "data", model);
    report.torchscript_class = first_torchscript_class(saved);
  }
  check_storage_records(archive, model, report);
  summarise_contents(model, report);
}

namespace {

// A ZIP the checks refuse, thrown on: exit 8 where names a loader still reads
// (or extracts outside its folder) make the refusal an attack.
[[noreturn]] void refuse_zip(const Error& e, const ByteSource& source, const std::string& path,
                             const LoadSafetyOptions& load) {
  if (e.kind() != ErrorKind::BadInput) throw e;
  const std::optional<RefusedZipVerdict> names = assess_refused_zip_names(source, load);
  if (!names) throw e;
  const size_t more = names->safety.findings.size() - 1;
  throw Error(ErrorKind::UnsafeToLoad,
              "unsafe to load: " + names->safety.worst_line() +
                  (more > 0 ? " (and " + std::to_string(more) + " more finding(s))" : std::string()),
              path, "do not load it: tsarchive refuses this ZIP (" + std::string(e.what()) +
                        "), but a PyTorch loader reads it; 'tsarchive verify' lists every finding");
}

void inspect_zip(std::unique_ptr<ByteSource> source, InspectReport& report, const LoadSafetyOptions& load) {
  std::optional<LoadSafety> legacy;
  try {
    legacy = assess_legacy_export_load_safety(*source, load);
  } catch (const Error& e) {
    refuse_zip(e, *source, report.path, load);
  }
  if (legacy) {
    report.kind = FileKind::ExportedProgram;
    report.load_safety = std::move(*legacy);
    report.notes.push_back("torch.export's layout before PyTorch 2.6 (records at the ZIP's root): only what "
                           "torch.export.load would run of it is read");
    return;
  }
  std::unique_ptr<TorchArchive> opened;
  try {
    opened = std::make_unique<TorchArchive>(borrow_source(*source));
  } catch (const Error& e) {
    refuse_zip(e, *source, report.path, load);
  }
  const TorchArchive& archive = *opened;
  if (archive.kind() != FileKind::OtherZip) report.load_safety = assess_archive_load_safety(archive, load);
  inspect_archive(archive, report);
}

// The raw storages after a legacy stream's pickles, read as torch.load's
// _legacy_load reads them: per key of the storage-key list, an int64 element
// count, which must be what the key's persistent id declared ("storage has
// wrong byte size"), then count x element size bytes ("unexpected EOF"
// when the file ends first). torch.save writes nothing after the last one.
void check_legacy_storages(const ByteSource& source, uint64_t offset, const PickleGraph& object,
                           const PickleGraph& keys, std::vector<std::string>& problems) {
  const std::map<std::string, StorageInfo> declared = declared_storages(object, "");
  const PickleNode& list = keys.at(keys.root());
  if (list.kind != PickleKind::List && list.kind != PickleKind::Tuple) {
    problems.push_back("the storage-key list (legacy pickle 5) is not a list");
    return;
  }
  const uint64_t size = source.size();
  for (PickleRef k : keys.items(list)) {
    const std::optional<std::string_view> key = keys.string_at(k);
    if (!key) return problems.push_back("the storage-key list (legacy pickle 5) holds something that is not a key");
    const std::string name(*key);
    const auto it = declared.find(name);
    if (it == declared.end()) {
      return problems.push_back("storage '" + name + "' has data but no persistent id of the object declares it");
    }
    const StorageInfo& s = it->second;
    if (size - offset < 8) {
      return problems.push_back("truncated: storage '" + name + "' needs 8 bytes for its element count at offset " +
                                std::to_string(offset) + ", the file ends at " + std::to_string(size));
    }
    const std::string count_bytes = source.read_string(offset, 8);
    uint64_t count = 0;
    for (int i = 7; i >= 0; --i) count = (count << 8) | static_cast<uint8_t>(count_bytes[static_cast<size_t>(i)]);
    if (count != s.numel) {
      return problems.push_back("storage '" + name + "' holds " + std::to_string(count) + " elements after the " +
                                "pickles, but its persistent id declares " + std::to_string(s.numel));
    }
    offset += 8;
    if (size - offset < s.nbytes) {
      return problems.push_back("truncated: storage '" + name + "' needs " + std::to_string(s.nbytes) +
                                " bytes at offset " + std::to_string(offset) + ", the file ends at " +
                                std::to_string(size));
    }
    offset += s.nbytes;
  }
  if (offset < size) {
    problems.push_back(std::to_string(size - offset) + " bytes follow the last storage (from offset " +
                       std::to_string(offset) + "): torch.save writes none, torch.load does not read them");
  }
}

// Legacy torch.save: pickles for magic, protocol, sys_info, the object, and
// the storage keys, then raw storages. The object's tensors go to `model`
// (when given), what does not add up to `problems`.
void read_legacy(const ByteSource& source, ModelContents* model, std::vector<std::string>& problems) {
  constexpr uint64_t kMaxHeader = 1ull << 30;
  const std::string bytes = source.read_string(0, static_cast<size_t>(std::min(source.size(), kMaxHeader)));
  size_t offset = 0;
  try {
    for (int i = 0; i < 3; ++i) parse_pickle(bytes, "legacy torch.save header", offset, &offset);
    const PickleGraph object = parse_pickle(bytes, "legacy torch.save object", offset, &offset);
    if (model != nullptr) collect_saved_object(object, "", *model);
    const PickleGraph keys = parse_pickle(bytes, "legacy torch.save storage keys", offset, &offset);
    check_legacy_storages(source, offset, object, keys, problems);
  } catch (const Error& e) {
    throw e.with_file(source.name());
  }
}

void inspect_legacy(const ByteSource& source, InspectReport& report) {
  ModelContents model;
  read_legacy(source, &model, model.problems);
  summarise_contents(model, report);
}

// Top-level fields of an ONNX ModelProto; the graph itself is skipped by length.
OnnxInfo read_onnx(const ByteSource& source) {
  constexpr uint64_t kMaxScan = 64ull << 20;
  const std::string bytes = source.read_string(0, static_cast<size_t>(std::min(source.size(), kMaxScan)));
  ByteReader r(bytes, "ONNX model");
  auto varint = [&r]() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t b = r.u8();
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    throw_bad_input("ONNX model: a varint is too long");
  };
  OnnxInfo info;
  try {
    while (!r.at_end()) {
      const uint64_t tag = varint();
      const uint64_t field = tag >> 3;
      const int wire = static_cast<int>(tag & 7);
      if (wire == 0) {
        const uint64_t v = varint();
        if (field == 1) info.ir_version = static_cast<int64_t>(v);
      } else if (wire == 2) {
        const std::string_view body = r.bytes(varint());
        if (field == 2) info.producer_name = std::string(body);
        if (field == 3) info.producer_version = std::string(body);
        if (field == 8) {  // OperatorSetIdProto { domain = 1; version = 2 }
          ByteReader o(body, "ONNX opset");
          std::pair<std::string, int64_t> opset;
          while (!o.at_end()) {
            const uint8_t t = o.u8();
            if (t == 0x0a) opset.first = std::string(o.bytes(o.u8()));
            else if (t == 0x10) opset.second = o.u8();
            else break;
          }
          info.opsets.push_back(opset);
        }
      } else if (wire == 5) {
        r.skip(4);
      } else if (wire == 1) {
        r.skip(8);
      } else {
        break;
      }
    }
  } catch (const Error&) {
    // The scan is best-effort beyond the first fields; a cut-off graph is not our concern here.
  }
  return info;
}

void add_kind_notes(InspectReport& report) {
  switch (report.kind) {
    case FileKind::TorchSave:
    case FileKind::LegacyTorchSave:
      if (!report.torchscript_class.empty()) {
        report.notes.push_back("neither torch.load nor torch.jit.load reads it: its pickle names the TorchScript class " +
                               report.torchscript_class + ", which only a TorchScript archive's code/ defines, and it "
                               "has no code/ (torch.load fails with \"No module named '__torch__'\", torch.jit.load "
                               "wants code/ and constants.pkl); save the module again with torch.jit.save, or its "
                               "tensors with torch.save(model.state_dict())");
        break;
      }
      report.notes.push_back("made by torch.save: it has no code/, so torch::jit::load and torch.jit.load reject it; "
                             "load it with torch.load, or export the model with torch.jit.script/trace and torch.jit.save");
      break;
    case FileKind::TorchPackage:
      report.notes.push_back("made by torch.package.PackageExporter: load it with torch.package.PackageImporter, whose "
                             "load_pickle imports and runs the Python modules inside (see Loading); torch.load and "
                             "torch.jit.load refuse it (it has no data.pkl and no constants.pkl)");
      break;
    case FileKind::LegacyTar:
      report.notes.push_back("the tar format of PyTorch 0.1-0.3: torch.load still reads it, but PyTorch 2.6 and later "
                             "only with weights_only=False, which runs its pickles; if Loading says it is safe, load "
                             "it once and save it again with torch.save(obj.state_dict())");
      break;
    case FileKind::ExportedProgram:
      if (report.pt2 && !report.pt2->aoti.empty()) {
        report.notes.push_back("an AOTInductor package: load it with torch._inductor.aoti_load_package (Python) or "
                               "libtorch 2.x's torch::inductor::AOTIModelPackageLoader, not torch::jit::load");
      } else {
        report.notes.push_back("a torch.export program: load it with torch.export.load (Python); for C++, compile it "
                               "with torch._inductor.aoti_compile_and_package. torch::jit::load does not read it");
      }
      break;
    case FileKind::Onnx:
      report.notes.push_back("an ONNX model: run it with ONNX Runtime or TensorRT, not libtorch");
      break;
    case FileKind::Pickle:
      report.notes.push_back("a plain pickle: pickle.load and torch.load(weights_only=False) run what it names "
                             "(see Loading); tsarchive only reads it");
      break;
    case FileKind::LiteInterpreter:
      report.notes.push_back("loads with torch::jit::_load_for_mobile (lite interpreter)" +
                             std::string(report.classes.empty() ? "" : "; it also has code/, so torch::jit::load reads it"));
      break;
    default:
      break;
  }
}

}  // namespace

std::map<std::string, std::vector<std::string>> tensors_by_record(const std::vector<TensorInfo>& tensors) {
  std::map<std::string, std::vector<std::string>> out;
  for (const TensorInfo& t : tensors) out[t.storage_record].push_back(t.path);
  return out;
}

std::vector<std::string> legacy_torch_save_damage(const ByteSource& source) {
  std::vector<std::string> problems;
  try {
    read_legacy(source, nullptr, problems);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::BadInput) throw;
    problems.push_back(e.what());
  }
  return problems;
}

ModelContents archive_tensors(const TorchArchive& archive) {
  if (archive.kind() == FileKind::ExportedProgram) return pt2_tensors(read_pt2(archive));
  return read_torchscript_model(archive).model;
}

TorchScriptModel read_torchscript_model(const TorchArchive& archive) {
  TorchScriptModel out;
  out.classes = read_classes(archive);
  ClassIndex index;
  for (const CodeClass& c : out.classes) index.emplace(c.qualified_name, &c);
  const Record* data = archive.find("data.pkl");
  if (data == nullptr) {
    throw_bad_input("the archive has no data.pkl record", archive.path(),
                    "the archive is incomplete; re-export it with torch.jit.save");
  }
  // A tensor per storage record is the usual shape: room for them up front
  // saves growing the vector (copies, and fresh pages) as they are found.
  out.model.tensors.reserve(static_cast<size_t>(std::count_if(
      archive.records().begin(), archive.records().end(), [](const Record& r) { return r.kind == RecordKind::TensorData; })));
  collect_module(read_pickle(archive, *data), index, out.model);
  if (const Record* constants = archive.find("constants.pkl")) {
    collect_constants(read_pickle(archive, *constants), out.model);
  }
  return out;
}

InspectReport inspect_source(std::unique_ptr<ByteSource> source, const LoadSafetyOptions& load) {
  InspectReport report;
  report.path = source->name();
  report.file_size = source->size();
  if (report.file_size == 0) {
    throw_bad_input("the file is empty", report.path, "it is not a model; check how it was written or downloaded");
  }
  report.kind = detect_file_kind(*source);
  switch (report.kind) {
    case FileKind::OtherZip:
      inspect_zip(std::move(source), report, load);
      break;
    case FileKind::LegacyTorchSave:
      report.load_safety = assess_load_safety(*source, load);
      inspect_legacy(*source, report);
      break;
    case FileKind::LegacyTar:
      report.tar = list_tar(*source);
      if (report.tar) report.load_safety = assess_tar_load_safety(*source, *report.tar, load);
      break;
    case FileKind::Onnx:
      report.onnx = read_onnx(*source);
      break;
    case FileKind::NotAModel:
      if (looks_like_pickle(*source)) {
        report.kind = FileKind::Pickle;
        report.load_safety = assess_load_safety(*source, load);
        report.problems = report.load_safety->damage;
        break;
      }
      [[fallthrough]];
    default:
      throw_bad_input("not a PyTorch model file (no ZIP, ONNX or torch.save signature)", report.path,
                      "give a file written by torch.jit.save, torch.save or torch.onnx.export");
  }
  add_kind_notes(report);
  return report;
}

InspectReport inspect_file(const std::string& path, const LoadSafetyOptions& load) {
  return inspect_source(open_file_source(path), load);
}


std::string read_extra_file(const std::string& path, const std::string& name) {
  const auto archive = open_torchscript_archive(open_file_source(path), "this file has no extra files", true);
  return read_extra(*archive, name, kExtraReadLimit);
}

std::string read_code(const std::string& path, const std::string& class_name) {
  const auto owned = open_torchscript_archive(open_file_source(path), "this file has no TorchScript code");
  const TorchArchive& archive = *owned;
  std::string out;
  std::vector<std::string> known;
  for (const Record& r : archive.records()) {
    if (r.kind != RecordKind::Code || r.name.compare(r.name.size() - 3, 3, ".py") != 0) continue;
    const std::string source = archive.read(r, ReadLimits::kCode);
    if (class_name.empty()) {
      out += "# " + r.name + "\n" + source;
      if (!source.empty() && source.back() != '\n') out += '\n';
      continue;
    }
    const CodeFile file = parse_torchscript_code(source, r.name);
    for (const CodeClass& c : file.classes) {
      const std::string short_name = c.qualified_name.substr(c.qualified_name.rfind('.') + 1);
      known.push_back(c.qualified_name);
      if (c.qualified_name != class_name && short_name != class_name) continue;
      size_t begin = 0;
      for (size_t line = 0; line < c.first_line; ++line) begin = source.find('\n', begin) + 1;
      size_t end = begin;
      for (size_t line = c.first_line; line < c.end_line && end < source.size(); ++line) {
        const size_t nl = source.find('\n', end);
        end = nl == std::string::npos ? source.size() : nl + 1;
      }
      out += "# " + c.qualified_name + " (" + r.name + ")\n" + source.substr(begin, end - begin);
    }
  }
  if (!class_name.empty() && out.empty()) {
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    throw_bad_input("no class '" + class_name + "' in code/", path,
                    list.empty() ? "the archive has no code/ classes" : "classes: " + list);
  }
  return out;
}

}  // namespace tsarchive
