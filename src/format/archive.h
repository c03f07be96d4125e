// A PyTorch ZIP archive seen as records under one top folder.
//
// PyTorchStreamWriter (caffe2/serialize/inline_container.cc) names every entry
// "<archive>/<record>"; the reader takes <archive> from the first entry and
// looks records up under it. Records of a TorchScript archive:
//   data.pkl          the module object (pickle, protocol 2)
//   constants.pkl     tuple of tensor constants; marks a TorchScript archive
//   data/<key>        raw storage bytes for data.pkl, stored, 64-byte aligned
//   constants/<key>   raw storage bytes for constants.pkl
//   code/**.py        TorchScript source; code/**.py.debug_pkl source ranges
//   bytecode.pkl      lite-interpreter (.ptl) bytecode; constants/ beside it
//   extra/<name>      user files (_extra_files), written first
//   version | .data/version   decimal format version (newer writers: .data/)
//   byteorder, .data/serialization_id   written by newer PyTorch
//   traced_inputs.pkl, traced_inputs/<key>   a traced module's example inputs
//                     (PyTorch 2.x's torch.jit.save; torch.jit.load(_restore_shapes=True))
// A torch.save file is the same layout with data.pkl and data/ only.
// A torch.package archive (PackageExporter) has .data/version,
// .data/extern_modules, .data/<n>.storage and the package's own files: *.py
// modules and pickles (load_pickle) under their package names.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/zip.h"

namespace tsarchive {

enum class FileKind {
  TorchScript,       // torch.jit.save
  LiteInterpreter,   // _save_for_lite_interpreter (.ptl): has bytecode.pkl
  TorchSave,         // torch.save, ZIP format: not TorchScript
  LegacyTorchSave,   // torch.save before 1.6: a bare pickle stream
  LegacyTar,         // torch.save of PyTorch 0.1-0.3: a tar of pickles, which torch.load still reads
  TorchPackage,      // torch.package.PackageExporter: .data/extern_modules, Python modules, pickles;
                     // no data.pkl or constants.pkl, so torch.load and torch.jit.load refuse it
  ExportedProgram,   // torch.export .pt2
  Onnx,              // ONNX ModelProto
  OtherZip,          // a ZIP, but not written by PyTorch
  Pickle,            // a plain pickle (.pkl, .pickle, .bin): what pickle.load reads; detect_file_kind
                     // leaves it NotAModel, inspect and verify name it (load_safety.h, looks_like_pickle)
  NotAModel,
};

// Stable identifier used in JSON ("torchscript", "lite", ...).
std::string_view file_kind_id(FileKind kind);
// For people ("TorchScript archive", ...).
std::string_view file_kind_name(FileKind kind);

enum class RecordKind {
  Pickle,           // data.pkl, constants.pkl
  Bytecode,         // bytecode.pkl
  TensorData,       // data/<key>
  ConstantData,     // constants/<key>
  Code,             // code/**.py
  DebugInfo,        // *.debug_pkl
  Extra,            // extra/<name>
  Version,          // version, .data/version
  ByteOrder,        // byteorder
  SerializationId,  // .data/serialization_id
  TracedInputs,     // traced_inputs.pkl, traced_inputs/<key>
  Program,          // .pt2: models/<model>.json (a serialized ExportedProgram)
  PayloadConfig,    // .pt2: data/weights|constants/<model>_*_config.json
  SampleInputs,     // .pt2: data/sample_inputs/<model>.pt
  Compiled,         // .pt2: data/aotinductor/** (AOTInductor's code and libraries)
  Other,
};

std::string_view record_kind_id(RecordKind kind);
RecordKind classify_record(std::string_view relative_name);
// The same for a record of a .pt2 (PT2 Archive Spec, format/pt2.h): weights are
// TensorData, data/constants/ ConstantData, archive_format and archive_version Version.
RecordKind classify_pt2_record(std::string_view relative_name);

// Where the extra files a producer attaches live (relative to the top folder).
inline constexpr std::string_view kExtraFolder = "extra/";

// "extra/" + name: the record of the extra file `name`.
inline std::string extra_record_name(std::string_view name) { return std::string(kExtraFolder) + std::string(name); }

struct Record {
  std::string name;  // relative to the top folder
  RecordKind kind;
  const ZipEntry* entry;

  // The name under extra/ of an extra file's record ("labels.json" for
  // "extra/labels.json"); only for kind == RecordKind::Extra.
  std::string extra_name() const { return name.substr(kExtraFolder.size()); }
};

// Size limits for records read into memory; anything larger is refused as hostile.
struct ReadLimits {
  static constexpr uint64_t kPickle = 1ull << 30;  // data.pkl of the largest real models is a few MB
  static constexpr uint64_t kCode = 64ull << 20;
  static constexpr uint64_t kSmall = 4096;         // version, byteorder, serialization id
};

// PyTorch's record listing (getAllRecords) copies names into a 512-byte
// buffer: a longer name would be listed as another. Refused.
inline constexpr size_t kMaxRecordName = 511;

class TorchArchive {
 public:
  // Reads the ZIP layout and checks that every entry is under one top folder.
  explicit TorchArchive(std::unique_ptr<ByteSource> source);

  const ZipArchive& zip() const { return zip_; }
  const std::string& path() const { return zip_.source().name(); }
  const std::string& top_folder() const { return top_folder_; }
  const std::vector<Record>& records() const { return records_; }
  FileKind kind() const { return kind_; }

  // The record libtorch reads for `relative_name`: names compare ignoring
  // ASCII case, as miniz's lookups do (names that fold to one are refused).
  const Record* find(std::string_view relative_name) const;
  std::string read(const Record& record, uint64_t max_size) const;
  // The same, in chunks (see ZipArchive::read_to).
  void read_to(const Record& record, uint64_t max_size, const ZipEntryReader::Sink& sink) const;
  // Reads a record if present; empty optional if not.
  std::optional<std::string> read_optional(std::string_view relative_name, uint64_t max_size) const;

  // The format version and the record it came from ("version" or ".data/version").
  struct Version {
    std::optional<int64_t> value;
    std::string record;
  };
  Version format_version() const;

 private:
  ZipArchive zip_;
  std::string top_folder_;
  std::vector<Record> records_;
  struct FoldedHash {
    size_t operator()(std::string_view s) const;
  };
  struct FoldedEqual {
    bool operator()(std::string_view a, std::string_view b) const;
  };
  std::unordered_map<std::string_view, size_t, FoldedHash, FoldedEqual> by_name_;  // views into records_
  FileKind kind_ = FileKind::OtherZip;
};

// Opens `source` as a TorchScript or lite-interpreter archive. Anything else
// (torch.save, ONNX, a foreign ZIP, not a model) is Error(BadInput) whose
// message is `refusal` followed by what the file is, e.g. "this file has no
// extra files: it is a torch.save file". `accept_pt2` also opens a .pt2
// (FileKind::ExportedProgram), for what reads both alike (inspect --extra,
// extra, verify, diff, stamp --keep-bytes): its hint then names both.
// `accepted`, when given, is the hint instead (a command that takes more kinds
// by other paths names them all).
std::unique_ptr<TorchArchive> open_torchscript_archive(std::unique_ptr<ByteSource> source, const std::string& refusal,
                                                       bool accept_pt2 = false, const std::string& accepted = "");

// Names the kind of any file from its first bytes and, for ZIPs, its records.
// Never throws for content; only for I/O.
FileKind detect_file_kind(const ByteSource& source);

}  // namespace tsarchive
