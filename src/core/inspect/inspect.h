// `inspect` as data: everything a model file holds, read without libtorch and
// without executing anything. Rendering (text, JSON) lives in the CLI.
#pragma once

#include <map>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "format/archive.h"
#include "core/edit/extra.h"
#include "core/inspect/load_safety.h"
#include "core/inspect/torch_package.h"
#include "format/model.h"
#include "format/pt2.h"
#include "format/tar.h"
#include "core/inputs/run_check.h"
#include "core/provenance/signing_embedded.h"
#include "format/torchscript_code.h"

namespace tsarchive {

struct RecordInfo {
  std::string name;  // relative to the top folder
  RecordKind kind;
  uint64_t size = 0;
  uint64_t compressed_size = 0;
  uint16_t method = 0;
  uint64_t data_offset = 0;
  uint32_t crc32 = 0;
  bool aligned = false;  // data starts on a 64-byte boundary
};

struct DtypeTotal {
  std::string dtype;
  uint64_t tensors = 0;
  uint64_t elements = 0;
  uint64_t bytes = 0;
};

struct OnnxInfo {
  int64_t ir_version = 0;
  std::string producer_name;
  std::string producer_version;
  std::vector<std::pair<std::string, int64_t>> opsets;  // domain ("" = ai.onnx), version
};

struct InspectReport {
  std::string path;
  uint64_t file_size = 0;
  FileKind kind = FileKind::NotAModel;
  std::vector<std::string> notes;  // what the kind means for the user

  // ZIP archives
  bool is_zip = false;
  std::string top_folder;
  std::optional<int64_t> format_version;
  std::string version_record;
  std::optional<std::string> byteorder;
  std::optional<std::string> serialization_id;
  std::vector<RecordInfo> records;
  uint64_t total_size = 0;
  uint64_t compressed_size = 0;
  uint64_t tensor_records = 0;
  uint64_t tensor_records_stored = 0;
  uint64_t tensor_records_aligned = 0;
  std::vector<ExtraFileInfo> extra_files;
  // A check recorded by `run --record` (run_check.h); a problem reading it
  // goes to `problems`.
  std::optional<RunCheck> run_check;
  // The signature the archive carries (signing_embedded.h), as it names its
  // signer: unverified until `verify --key|--certificate-chain`.
  std::optional<EmbeddedSignatureInfo> signature;

  // Contents
  std::vector<TensorInfo> tensors;
  std::vector<StorageInfo> storages;
  std::vector<DtypeTotal> dtype_totals;
  uint64_t parameter_count = 0;  // elements of role=parameter tensors
  uint64_t tensor_bytes = 0;     // bytes of distinct storages
  std::vector<ModuleInfo> modules;
  std::vector<CodeClass> classes;  // from code/
  std::string root_type;           // class of the root module
  // A torch.save file's first __torch__ class (TorchScript's own namespace,
  // defined only by an archive's code/, which such a file lacks); empty if none.
  std::string torchscript_class;
  std::optional<int64_t> bytecode_version;
  std::optional<OnnxInfo> onnx;
  std::optional<Pt2Contents> pt2;  // a .pt2 (FileKind::ExportedProgram): its programs, weights, AOTInductor models
  std::optional<TarListing> tar;   // a legacy tar file (FileKind::LegacyTar): its members as tarfile lists them
  std::optional<TorchPackageInfo> package;  // a torch.package archive (FileKind::TorchPackage)

  std::vector<std::string> problems;  // inconsistencies found while reading

  // What loading the file would run (load_safety.h); absent for ONNX.
  std::optional<LoadSafety> load_safety;
};

// Inspects the file at `path`. Throws Error(Io) when it cannot be read and
// Error(BadInput) when it is not a model file or is malformed.
// `load` sets the load-safety verdict's PyTorch version and allowed globals.
InspectReport inspect_file(const std::string& path, const LoadSafetyOptions& load = {});
InspectReport inspect_source(std::unique_ptr<ByteSource> source, const LoadSafetyOptions& load = {});
// Fills the ZIP and content parts of `report` from an open archive.
void inspect_archive(const TorchArchive& archive, InspectReport& report);

// What code/, data.pkl and constants.pkl of a TorchScript or lite-interpreter
// archive declare: the classes, and the tensors and modules (tensor roles
// come from the classes). Shared by inspect and diff.
struct TorchScriptModel {
  std::vector<CodeClass> classes;
  ModelContents model;
};
TorchScriptModel read_torchscript_model(const TorchArchive& archive);

// The tensors of an archive: from the pickles of a TorchScript archive, from
// the weights and constants configs of a .pt2 (by FQN, as state_dict names
// them: a TorchScript archive and its torch.export counterpart compare).
ModelContents archive_tensors(const TorchArchive& archive);

// The paths of the tensors each storage record holds ("data/3" ->
// {"encoder.0.weight"}), in the model's order: how a record that changed is
// named by the tensors behind it (verify; diff names tensors by path too).
std::map<std::string, std::vector<std::string>> tensors_by_record(const std::vector<TensorInfo>& tensors);

// What makes a legacy (pre-1.6) torch.save file fail torch.load though its
// pickles are whole: a storage whose raw data the file cuts short, an element
// count that is not the declared one, bytes after the last storage (none when
// intact). A pickle that does not parse is one problem, its reason.
std::vector<std::string> legacy_torch_save_damage(const ByteSource& source);

// Reads extra/<name> of a TorchScript archive (bounded), for `inspect --extra`.
std::string read_extra_file(const std::string& path, const std::string& name);

// The text of code/ records: all of them, or the one class named by its
// qualified or short name. Throws Error(BadInput) if the class is not found.
std::string read_code(const std::string& path, const std::string& class_name);


}  // namespace tsarchive
