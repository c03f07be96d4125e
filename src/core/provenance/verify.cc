#include "core/provenance/verify.h"

#include <map>

#include "base/build_info.h"
#include "base/error.h"
#include "base/strings.h"
#include "core/inspect/inspect.h"
#include "core/provenance/signing_embedded.h"

namespace tsarchive {
namespace {

// A version outside the linked libtorch's range is not damage: the archive was
// written by a newer PyTorch (or is older than this libtorch still reads).
std::string version_gap(const char* what, int64_t version, int64_t min, int64_t max, const std::string& libtorch) {
  const std::string range = " (" + std::to_string(min) + "\u2013" + std::to_string(max) + ")";
  if (version > max) {
    return std::string("written by a newer PyTorch: ") + what + " " + std::to_string(version) +
           " is newer than libtorch " + libtorch + " reads" + range;
  }
  return std::string("written by an old PyTorch: ") + what + " " + std::to_string(version) +
         " is older than libtorch " + libtorch + " reads" + range;
}

// A TorchScript archive's storages of a dtype the libtorch's ScalarType list
// lacks (uint16 before 2.3, ...): its unpickler refuses torch.UInt16Storage
// as an unknown global, though newer ones read the archive.
void check_dtypes(const InspectReport& contents, const ReadableVersions& readable, std::vector<std::string>& unreadable) {
  const bool jit = contents.kind == FileKind::TorchScript || contents.kind == FileKind::LiteInterpreter;
  if (!jit || readable.scalar_types <= 0) return;
  for (const StorageInfo& s : contents.storages) {
    const int code = dtype_scalar_type(s.dtype);
    if (code < readable.scalar_types) continue;
    std::string tensor;
    for (const TensorInfo& t : contents.tensors) {
      if (t.storage_record == s.record) {
        tensor = " (tensor '" + t.path + "')";
        break;
      }
    }
    unreadable.push_back("written by a newer PyTorch: storage '" + s.record + "'" + tensor + " holds " + s.dtype +
                         ", a dtype libtorch " + readable.libtorch + " does not know (it knows the first " +
                         std::to_string(readable.scalar_types) + " scalar types)");
    return;
  }
}

void check_versions(const VerifyReport& report, const ReadableVersions& readable, std::vector<std::string>& unreadable) {
  if (report.format_version &&
      (*report.format_version < readable.min_format || *report.format_version > readable.max_format)) {
    unreadable.push_back(version_gap("format version", *report.format_version, readable.min_format,
                                     readable.max_format, readable.libtorch));
  }
  if (report.bytecode_version &&
      (*report.bytecode_version < readable.min_bytecode || *report.bytecode_version > readable.max_bytecode)) {
    unreadable.push_back(version_gap("bytecode version", *report.bytecode_version, readable.min_bytecode,
                                     readable.max_bytecode, readable.libtorch));
  }
}

// A .pt2 is read by torch.export.load and AOTIModelPackageLoader, not by
// torch::jit::load: libtorch's format range does not apply to it. PyTorch's
// PT2ArchiveReader refuses an archive without archive_format "pt2" (read_pt2
// reports another value), and load_pt2 one whose archive_version is not "0",
// the only version PyTorch (up to 2.13) writes: a newer one is unreadable,
// not damage.
void check_pt2_versions(const TorchArchive& archive, VerifyReport& report) {
  if (archive.find("serialized_exported_program.json") != nullptr) return;  // the layout before 2.6, a note
  if (archive.find("archive_format") == nullptr) {
    report.problems.push_back("the .pt2 has no archive_format record (torch.export.load refuses it)");
  }
  std::optional<std::string> version = archive.read_optional("archive_version", ReadLimits::kSmall);
  if (!version) return;
  while (!version->empty() && (version->back() == '\n' || version->back() == ' ')) version->pop_back();
  if (*version != "0") {
    report.unreadable.push_back("written by a newer PyTorch: PT2 archive_version '" + version->substr(0, 20) +
                                "' (torch.export.load of PyTorch up to 2.13 reads version 0)");
  }
}

StampCheck check_stamp(const TorchArchive& archive, const Record& record, const std::vector<RecordDigest>& digests) {
  const std::string& stamp_name = record.name;
  StampCheck check;
  try {
    check.stamp = parse_stamp(archive.read(record, 16ull << 20), archive.path(), stamp_name);
  } catch (const Error& e) {
    check.problem = e.what();
    return check;
  }
  if (!check.stamp.has_digests) return check;
  std::map<std::string, const RecordDigest*> actual;
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const RecordDigest& d : digests) {
    if (d.name == stamp_name || d.name == kEmbeddedSignatureRecord) continue;  // the signature covers the stamp
    actual.emplace(d.name, &d);
    pairs.emplace_back(d.name, d.sha256);
  }
  for (const auto& [name, hex] : check.stamp.digests) {
    const auto it = actual.find(name);
    if (it == actual.end()) {
      check.missing.push_back(name);
    } else if (it->second->sha256 != hex) {
      check.changed.push_back(name);
    }
  }
  for (const auto& [name, _] : actual) {
    if (check.stamp.digests.count(name) == 0) check.added.push_back(name);
  }
  check.root_matches = root_digest(pairs) == check.stamp.root;
  return check;
}

// The tensors behind the changed records: inspect's for a TorchScript archive;
// a .pt2's come from its weights and constants configs, which inspect reports
// as payloads. Best effort: a .pt2 whose configs do not read names none.
void name_changed_tensors(const TorchArchive& archive, const InspectReport& contents, StampCheck& stamp) {
  std::vector<TensorInfo> held = contents.tensors;
  if (archive.kind() == FileKind::ExportedProgram) {
    try {
      held = archive_tensors(archive).tensors;
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Io) throw;
    }
  }
  const auto tensors = tensors_by_record(held);
  for (const std::string& name : stamp.changed) {
    if (const auto found = tensors.find(name); found != tensors.end()) stamp.changed_tensors[name] = found->second;
  }
}

}  // namespace

std::string StampPlace::name() const {
  if (producer != nullptr) return kStampAltName;
  if (stamp != nullptr) return stamp->extra_name();
  return kStampName;
}

StampPlace locate_stamp(const TorchArchive& archive) {
  StampPlace place;
  if (const Record* main = archive.find(kStampRecord)) {
    bool ours = true;  // unreadable or too large to be ours: the damage is reported elsewhere
    if (main->entry->uncompressed_size <= (16ull << 20)) {
      try {
        ours = is_tsarchive_stamp(archive.read(*main, 16ull << 20));
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::Io) throw;
      }
    } else {
      ours = false;
    }
    (ours ? place.stamp : place.producer) = main;
  }
  if (place.stamp == nullptr) place.stamp = archive.find(kStampAltRecord);
  return place;
}

std::string pytorch2_record(const TorchArchive& archive) {
  for (const char* name : {".data/serialization_id", "byteorder"}) {
    if (archive.find(name) != nullptr) return name;
  }
  return {};
}

namespace {

// The storage records the archive's tensors are stored in ("data/3", "constants/0").
// None when its pickles do not read as inspect reads them: then every storage counts as unused.
std::map<std::string, std::vector<std::string>> storages_in_use(const TorchArchive& archive) {
  try {
    return tensors_by_record(archive_tensors(archive).tensors);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Io) throw;
    return {};
  }
}

bool is_storage(const Record& r) { return r.kind == RecordKind::TensorData || r.kind == RecordKind::ConstantData; }

}  // namespace

std::vector<std::string> records_a_resave_drops(const TorchArchive& archive) {
  const auto in_use = storages_in_use(archive);
  std::vector<std::string> dropped;
  for (const Record& r : archive.records()) {
    const bool foreign_code = r.kind == RecordKind::Code && !ends_with(r.name, ".py");
    const bool unused_storage = is_storage(r) && in_use.count(r.name) == 0;
    if (r.kind == RecordKind::TracedInputs || r.kind == RecordKind::Other || foreign_code || unused_storage) {
      dropped.push_back(r.name);
    }
  }
  return dropped;
}

std::vector<std::string> records_the_copy_lacks(const TorchArchive& original, const TorchArchive& copy) {
  std::vector<std::string> lacking;
  for (const Record& r : original.records()) {
    if (is_storage(r) || r.kind == RecordKind::Extra) continue;
    if (copy.find(r.name) == nullptr) lacking.push_back(r.name);
  }
  return lacking;
}

int verify_exit_code(VerifyOutcome outcome) {
  switch (outcome) {
    case VerifyOutcome::Intact: return 0;
    case VerifyOutcome::Mismatch: return 1;
    case VerifyOutcome::Malformed:
    case VerifyOutcome::Unreadable: return 3;
  }
  return 3;
}

VerifyOutcome VerifyReport::outcome() const {
  if (!problems.empty()) return VerifyOutcome::Malformed;
  if (!unreadable.empty()) return VerifyOutcome::Unreadable;
  if (stamp && !stamp->matches()) return VerifyOutcome::Mismatch;
  return VerifyOutcome::Intact;
}

VerifyReport verify_archive(const TorchArchive& archive, const VerifyOptions& options) {
  VerifyReport report;
  report.path = archive.path();
  report.file_size = archive.zip().source().size();
  report.kind = archive.kind();
  report.top_folder = archive.top_folder();
  // A .pt2 is not read by torch::jit::load: its versions are checked against torch.export.load's (check_pt2_versions).
  if (archive.kind() != FileKind::ExportedProgram) report.readable = options.readable;

  // SHA-256 costs as much as reading the file: only where something compares it.
  const StampPlace place = locate_stamp(archive);
  report.sha256 =
      options.digests && (options.all_sha256 || place.stamp || find_embedded_signature(archive) != nullptr);
  DigestOptions digest_options;
  digest_options.threads = options.threads;
  digest_options.sha256 = report.sha256;
  report.records = digest_records(archive, digest_options);
  for (const RecordDigest& d : report.records) {
    report.bytes_hashed += d.size;
    if (!d.problem.empty()) report.problems.push_back("record '" + d.name + "': " + d.problem);
  }

  // Content checks read records one by one and stop at the first damaged one;
  // they add nothing when records are already known damaged.
  InspectReport contents;
  if (report.problems.empty()) {
    contents.path = report.path;
    try {
      inspect_archive(archive, contents);
      report.format_version = contents.format_version;
      report.bytecode_version = contents.bytecode_version;
      for (std::string& p : contents.problems) report.problems.push_back(std::move(p));
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Io) throw;
      report.problems.push_back(e.what());
    }
    // Format versions start at 1 (caffe2/serialize/versions.h, every release):
    // a smaller one is no PyTorch's, old or new.
    if (report.format_version && *report.format_version < 1) {
      report.problems.push_back("format version " + std::to_string(*report.format_version) +
                                " is not one any PyTorch writes (they start at 1)");
    }
    if (!report.format_version && report.problems.empty()) {
      report.problems.push_back("the archive has no version record");
    }
  }
  if (report.kind == FileKind::ExportedProgram) {
    check_pt2_versions(archive, report);
  } else if (options.readable && report.problems.empty()) {
    check_versions(report, *options.readable, report.unreadable);
    check_dtypes(contents, *options.readable, report.unreadable);
  }

  if (!options.digests) return report;

  report.stamp_record = place.record();
  report.producer_info = place.producer != nullptr;
  if (const Record* stamp = place.stamp) {
    report.stamp = check_stamp(archive, *stamp, report.records);
    if (!report.stamp->changed.empty()) name_changed_tensors(archive, contents, *report.stamp);
    if (report.stamp->problem.empty() && !report.stamp->stamp.has_digests) {
      report.notes.push_back("the stamp carries no digests (an export hook wrote it while saving); "
                             "'tsarchive stamp' adds them");
    }
  } else if (report.producer_info) {
    report.notes.push_back("not stamped by tsarchive; producer info present (extra/" + std::string(kStampName) +
                           ", the producer's own): only structure and CRCs were checked ('tsarchive stamp' adds "
                           "digests in " + kStampAltRecord + " and leaves the producer's file as it is)");
  } else {
    report.notes.push_back("not stamped: only structure and CRCs were checked ('tsarchive stamp' adds digests)");
  }
  return report;
}

ReadableVersions built_libtorch_versions() {
  const BuildInfo& b = build_info();
  return ReadableVersions{b.torch_version,      b.reads_format_min,   b.reads_format_max,
                          b.reads_bytecode_min, b.reads_bytecode_max, b.reads_scalar_types};
}

}  // namespace tsarchive
