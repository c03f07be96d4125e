#include "format/archive.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "base/error.h"
#include "base/strings.h"
#include "format/tar.h"

namespace tsarchive {

std::string_view file_kind_id(FileKind kind) {
  switch (kind) {
    case FileKind::TorchScript: return "torchscript";
    case FileKind::LiteInterpreter: return "lite";
    case FileKind::TorchSave: return "torch_save";
    case FileKind::LegacyTorchSave: return "legacy_torch_save";
    case FileKind::LegacyTar: return "legacy_torch_save_tar";
    case FileKind::TorchPackage: return "torch_package";
    case FileKind::ExportedProgram: return "exported_program";
    case FileKind::Onnx: return "onnx";
    case FileKind::OtherZip: return "zip";
    case FileKind::Pickle: return "pickle";
    case FileKind::NotAModel: return "not_a_model";
  }
  return "unknown";
}

std::string_view file_kind_name(FileKind kind) {
  switch (kind) {
    case FileKind::TorchScript: return "TorchScript archive";
    case FileKind::LiteInterpreter: return "TorchScript lite-interpreter archive (.ptl)";
    case FileKind::TorchSave: return "torch.save file (not TorchScript)";
    case FileKind::LegacyTorchSave: return "legacy torch.save file (pre-1.6 pickle format, not TorchScript)";
    case FileKind::LegacyTar: return "legacy torch.save tar file (PyTorch 0.1-0.3 format, not TorchScript)";
    case FileKind::TorchPackage: return "torch.package archive (PackageExporter)";
    case FileKind::ExportedProgram: return "torch.export program (.pt2, not TorchScript)";
    case FileKind::Onnx: return "ONNX model (not TorchScript)";
    case FileKind::OtherZip: return "ZIP archive not written by PyTorch";
    case FileKind::Pickle: return "pickle file (not a PyTorch archive)";
    case FileKind::NotAModel: return "not a PyTorch model file";
  }
  return "unknown";
}

std::string_view record_kind_id(RecordKind kind) {
  switch (kind) {
    case RecordKind::Pickle: return "pickle";
    case RecordKind::Bytecode: return "bytecode";
    case RecordKind::TensorData: return "tensor";
    case RecordKind::ConstantData: return "constant";
    case RecordKind::Code: return "code";
    case RecordKind::DebugInfo: return "debug";
    case RecordKind::Extra: return "extra";
    case RecordKind::Version: return "version";
    case RecordKind::ByteOrder: return "byteorder";
    case RecordKind::SerializationId: return "serialization_id";
    case RecordKind::TracedInputs: return "traced_inputs";
    case RecordKind::Program: return "program";
    case RecordKind::PayloadConfig: return "payload_config";
    case RecordKind::SampleInputs: return "sample_inputs";
    case RecordKind::Compiled: return "compiled";
    case RecordKind::Other: return "other";
  }
  return "other";
}

RecordKind classify_record(std::string_view name) {
  if (name == "data.pkl" || name == "constants.pkl") return RecordKind::Pickle;
  if (name == "bytecode.pkl") return RecordKind::Bytecode;
  if (name == "version" || name == ".data/version") return RecordKind::Version;
  if (name == "byteorder") return RecordKind::ByteOrder;
  if (name == ".data/serialization_id") return RecordKind::SerializationId;
  if (name == "traced_inputs.pkl" || starts_with(name, "traced_inputs/")) return RecordKind::TracedInputs;
  if (starts_with(name, kExtraFolder)) return RecordKind::Extra;
  if (ends_with(name, ".debug_pkl")) return RecordKind::DebugInfo;
  if (starts_with(name, "code/")) return RecordKind::Code;
  if (starts_with(name, "data/")) return RecordKind::TensorData;
  if (starts_with(name, "constants/")) return RecordKind::ConstantData;
  return RecordKind::Other;
}

RecordKind classify_pt2_record(std::string_view name) {
  if (name == "archive_format" || name == "archive_version") return RecordKind::Version;
  if (starts_with(name, "models/")) return RecordKind::Program;
  if ((starts_with(name, "data/weights/") || starts_with(name, "data/constants/")) && ends_with(name, "_config.json")) {
    return RecordKind::PayloadConfig;
  }
  if (starts_with(name, "data/weights/")) return RecordKind::TensorData;
  if (starts_with(name, "data/constants/")) return RecordKind::ConstantData;
  if (starts_with(name, "data/sample_inputs/")) return RecordKind::SampleInputs;
  if (starts_with(name, "data/aotinductor/")) return RecordKind::Compiled;
  const RecordKind kind = classify_record(name);
  return kind == RecordKind::TensorData ? RecordKind::Other : kind;  // data/mtia, data/executorch, ...
}

namespace {

// torch.export.save before the PT2 archive format (PyTorch 2.1 on) wrote a
// plain zipfile with its records at the root: serialized_exported_program.json,
// serialized_state_dict.pt (.json in 2.1), serialized_constants.pt, version
// (the export schema's "MAJOR.MINOR"), extra_files/. torch.export.load of
// today reads the PT2 archive format, and that old layout only at its own
// schema major: say what the file is instead of "not a PyTorch ZIP".
void refuse_legacy_export(const ZipArchive& zip, const std::string& path) {
  if (zip.find("serialized_exported_program.json") == nullptr) return;
  std::string schema;
  if (const ZipEntry* version = zip.find("version"); version != nullptr && version->uncompressed_size <= 32) {
    try {
      schema = zip.read(*version, 32);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Io) throw;
    }
  }
  const bool plain = !schema.empty() && std::all_of(schema.begin(), schema.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
  });
  throw_bad_input("a torch.export file in the legacy layout of early PyTorch 2.x (serialized_exported_program.json at "
                  "the ZIP root" + (plain ? ", schema version " + schema : std::string()) +
                      "), which tsarchive reads only for its load-safety verdict (inspect, verify) and current "
                      "PyTorch only through torch.export.load's fallback",
                  path,
                  "load it with torch.export.load and save it again with a current torch.export.save "
                  "(a .pt2 in the PT2 archive format)");
}

}  // namespace

namespace {
// A record's kind as libtorch finds it: CODE/ is code/ to miniz. (Most names
// are lower case already: those are classified without a copy.)
RecordKind classify_folded(std::string_view name, RecordKind (*classify)(std::string_view)) {
  const bool upper = std::any_of(name.begin(), name.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
  return upper ? classify(ascii_lowered(name)) : classify(name);
}
}  // namespace

TorchArchive::TorchArchive(std::unique_ptr<ByteSource> source) : zip_(std::move(source)) {
  const auto& entries = zip_.entries();
  if (entries.empty()) throw_bad_input("the ZIP archive is empty", path(), "this is not a PyTorch archive");
  const std::string& first = entries.front().name;
  const size_t slash = first.find('/');
  if (slash == std::string::npos || slash == 0) {
    refuse_legacy_export(zip_, path());
    throw_bad_input("a ZIP archive, but not a PyTorch one: entry '" + first + "' is not inside a top folder", path(),
                    "PyTorch archives keep every record under one folder; give a file written by torch.jit.save");
  }
  top_folder_ = first.substr(0, slash);
  const std::string prefix = top_folder_ + "/";
  records_.reserve(entries.size());
  bool has_code = false;
  for (const ZipEntry& e : entries) {
    if (e.name.compare(0, prefix.size(), prefix) != 0) {
      throw_bad_input("entry '" + e.name + "' is outside the top folder '" + top_folder_ + "'", path(),
                      "the archive was altered or is not a PyTorch archive");
    }
    if (e.name.size() > kMaxRecordName) {
      throw_bad_input("entry '" + e.name.substr(0, 60) + "...' has a " + std::to_string(e.name.size()) +
                          "-byte name: PyTorch's reader keeps the first " + std::to_string(kMaxRecordName) +
                          " bytes of a name, so it would list this record under another one",
                      path(), "the archive was crafted or altered; do not load it");
    }
    std::string rel = e.name.substr(prefix.size());
    if (e.is_directory() && (e.uncompressed_size != 0 || e.compressed_size != 0)) {
      // miniz extracts no folder's data, yet PyTorch hands such an entry out as
      // a record: whatever its buffer held (uninitialized memory), not these bytes.
      throw_bad_input("entry '" + e.name + "' is a folder with " + std::to_string(e.uncompressed_size) +
                          " bytes of data, which no writer makes and PyTorch's reader does not read",
                      path(), "the archive was crafted or altered; do not load it");
    }
    if (rel.empty() || e.is_directory()) continue;  // a folder entry; PyTorch writes none (zip -r does)
    const RecordKind kind = classify_folded(rel, classify_record);
    has_code = has_code || kind == RecordKind::Code;
    records_.push_back(Record{std::move(rel), kind, &e});
  }

  by_name_.reserve(records_.size());
  for (size_t i = 0; i < records_.size(); ++i) by_name_.emplace(records_[i].name, i);
  const bool loader_records = find("data.pkl") != nullptr || find("constants.pkl") != nullptr;
  if (find("bytecode.pkl") != nullptr) {
    kind_ = FileKind::LiteInterpreter;
  } else if (!loader_records && find(".data/extern_modules") != nullptr) {
    // Only PackageExporter writes extern_modules; a package named code/ is no TorchScript.
    kind_ = FileKind::TorchPackage;
  } else if (find("constants.pkl") != nullptr || has_code) {
    kind_ = FileKind::TorchScript;
  } else if (find("serialized_exported_program.json") != nullptr || find("archive_format") != nullptr ||
             find("models/model.json") != nullptr) {
    kind_ = FileKind::ExportedProgram;
    for (Record& r : records_) r.kind = classify_folded(r.name, classify_pt2_record);
  } else if (find("data.pkl") != nullptr) {
    kind_ = FileKind::TorchSave;
  } else {
    kind_ = FileKind::OtherZip;
  }
}

size_t TorchArchive::FoldedHash::operator()(std::string_view s) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the lower-cased bytes
  for (char c : s) h = (h ^ static_cast<unsigned char>(ascii_lower(c))) * 1099511628211ull;
  return static_cast<size_t>(h);
}

bool TorchArchive::FoldedEqual::operator()(std::string_view a, std::string_view b) const {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  }
  return true;
}

const Record* TorchArchive::find(std::string_view relative_name) const {
  const auto it = by_name_.find(relative_name);
  return it == by_name_.end() ? nullptr : &records_[it->second];
}

std::string TorchArchive::read(const Record& record, uint64_t max_size) const {
  return zip_.read(*record.entry, max_size);
}

void TorchArchive::read_to(const Record& record, uint64_t max_size, const ZipEntryReader::Sink& sink) const {
  zip_.read_to(*record.entry, max_size, sink);
}

std::optional<std::string> TorchArchive::read_optional(std::string_view relative_name, uint64_t max_size) const {
  const Record* r = find(relative_name);
  if (r == nullptr) return std::nullopt;
  return read(*r, max_size);
}

TorchArchive::Version TorchArchive::format_version() const {
  // Like PyTorchStreamReader: prefer .data/version, fall back to version.
  Version v;
  for (const char* name : {".data/version", "version"}) {
    std::optional<std::string> text = read_optional(name, ReadLimits::kSmall);
    if (!text) continue;
    v.record = name;
    std::string s = *text;
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    bool digits = !s.empty() && s.size() <= 18;
    for (char c : s) digits = digits && std::isdigit(static_cast<unsigned char>(c));
    if (!digits) {
      throw_bad_input("version record '" + v.record + "' is not a number", path(), "the archive is damaged");
    }
    v.value = std::stoll(s);
    return v;
  }
  return v;
}

namespace {

// The legacy torch.save stream begins with a protocol-2 pickle of the magic
// number 0x1950a86a20f9469cfc6c as LONG1: 80 02 8a 0a 6c fc 9c 46 f9 20 6a a8 50 19.
bool is_legacy_torch_save(const unsigned char* p, size_t n) {
  static const unsigned char kMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  return n >= sizeof kMagic && std::memcmp(p, kMagic, sizeof kMagic) == 0;
}

// ONNX ModelProto: field 1 ir_version (varint, tag 0x08) comes first in what
// every exporter writes, followed by producer_name (0x12) or opset/graph.
bool looks_like_onnx(const unsigned char* p, size_t n) {
  if (n < 4 || p[0] != 0x08) return false;
  size_t i = 1;
  uint64_t ir = 0;
  for (int shift = 0; i < n && shift < 63; shift += 7, ++i) {
    ir |= uint64_t(p[i] & 0x7f) << shift;
    if (!(p[i] & 0x80)) break;
  }
  ++i;
  if (ir < 1 || ir > 64 || i >= n) return false;
  const unsigned char next = p[i];
  return next == 0x12 || next == 0x1a || next == 0x22 || next == 0x28 || next == 0x3a || next == 0x42;
}

// torch.load tries tarfile before anything else: a tar with a member it
// unpickles ('storages', 'tensors', 'pickle') is a legacy torch.save file.
bool is_legacy_tar(const ByteSource& source, const unsigned char* head, size_t n) {
  if (n < 512 || !is_tar_header(head)) return false;
  const std::optional<TarListing> tar = list_tar(source);
  if (!tar) return false;
  return std::any_of(tar->members.begin(), tar->members.end(), [](const TarMember& m) {
    return m.name == "storages" || m.name == "tensors" || m.name == "pickle";
  });
}

}  // namespace

FileKind detect_file_kind(const ByteSource& source) {
  unsigned char head[512] = {};
  const size_t n = static_cast<size_t>(std::min<uint64_t>(sizeof head, source.size()));
  source.read_at(0, head, n);
  if (n >= 4 && (std::memcmp(head, "PK\x03\x04", 4) == 0 || std::memcmp(head, "PK\x05\x06", 4) == 0)) {
    return FileKind::OtherZip;  // refined by TorchArchive once the layout is read
  }
  if (is_legacy_torch_save(head, n)) return FileKind::LegacyTorchSave;
  if (is_legacy_tar(source, head, n)) return FileKind::LegacyTar;
  if (looks_like_onnx(head, n)) return FileKind::Onnx;
  return FileKind::NotAModel;
}

namespace {
[[noreturn]] void refuse_kind(FileKind kind, const std::string& path, const std::string& refusal, bool accept_pt2,
                              const std::string& accepted) {
  const std::string name(file_kind_name(kind));
  const bool vowel = std::string("AEIOU").find(name[0]) != std::string::npos;
  const std::string is = name.rfind("not ", 0) == 0 ? "it is " : vowel ? "it is an " : "it is a ";
  throw_bad_input(refusal + ": " + is + name, path,
                  !accepted.empty() ? accepted
                  : accept_pt2      ? "give a TorchScript archive (torch.jit.save) or a .pt2 (torch.export.save)"
                                    : "give a TorchScript archive written by torch.jit.save");
}
}  // namespace

std::unique_ptr<TorchArchive> open_torchscript_archive(std::unique_ptr<ByteSource> source, const std::string& refusal,
                                                       bool accept_pt2, const std::string& accepted) {
  const FileKind sniffed = detect_file_kind(*source);
  if (sniffed != FileKind::OtherZip) refuse_kind(sniffed, source->name(), refusal, accept_pt2, accepted);
  auto archive = std::make_unique<TorchArchive>(std::move(source));
  if (archive->kind() != FileKind::TorchScript && archive->kind() != FileKind::LiteInterpreter &&
      !(accept_pt2 && archive->kind() == FileKind::ExportedProgram)) {
    refuse_kind(archive->kind(), archive->path(), refusal, accept_pt2, accepted);
  }
  return archive;
}

}  // namespace tsarchive
