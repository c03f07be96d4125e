// `verify` as data: is an archive intact, can libtorch read it, and does it
// still hold what its stamp (extra/producer_info.json) says?
//
// Checks, in one pass over the records (digest.h):
// - ZIP structure (read_zip_layout, TorchArchive: names, offsets, sizes,
//   overlaps, one top folder) and every record's CRC-32 and declared size,
//   which PyTorch's reader never checks;
// - the pickles parse with our safe reader and every tensor record holds at
//   least the bytes its storage needs (libtorch reads past a short record);
// - the format version (and a lite archive's bytecode version) is in the
//   range the linked libtorch reads; one outside it is not damage: it was
//   written by a newer (or much older) PyTorch, reported as `unreadable`;
// - with a stamp: every record's SHA-256 against the stamp's, named as
//   changed, missing (in the stamp, not the archive) or added (the reverse),
//   the way sigstore's model_signing reports a manifest.
#pragma once

#include <map>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/archive.h"
#include "core/provenance/digest.h"
#include "core/provenance/producer_info.h"

namespace tsarchive {

// Where an archive's stamp is (producer_info.h): extra/producer_info.json
// when tsarchive wrote that file; extra/tsarchive/producer_info.json when the
// producer's own extra/producer_info.json is there.
struct StampPlace {
  const Record* stamp = nullptr;     // tsarchive's stamp, if any
  const Record* producer = nullptr;  // a producer's own extra/producer_info.json, if any
  // Where a new stamp goes (under extra/): kStampAltName beside a producer's file, else kStampName.
  std::string name() const;
  std::string record() const { return extra_record_name(name()); }
};
StampPlace locate_stamp(const TorchArchive& archive);

// The format versions a libtorch reads (caffe2/serialize/versions.h), and
// how many c10::ScalarTypes it knows (a storage of a later dtype is
// "unknown torch global" to its unpickler).
struct ReadableVersions {
  std::string libtorch;  // "1.13.1"
  int64_t min_format = 0, max_format = 0;
  int64_t min_bytecode = 0, max_bytecode = 0;
  int scalar_types = 0;  // 0: not checked
};

// The versions the libtorch this tsarchive was built against reads
// (base/build_info.h).
ReadableVersions built_libtorch_versions();

struct VerifyOptions {
  unsigned threads = 0;  // 0: one per core
  std::optional<ReadableVersions> readable;
  // false: the structural checks alone (what the gate before libtorch needs,
  // checked_archive.h): CRC-32 without SHA-256, and no stamp check.
  bool digests = true;
  // Every record's SHA-256 even when the archive carries nothing to compare
  // them with (verify --json lists them). false: only when it carries a stamp
  // or an embedded signature; an unstamped archive's records get CRC-32 alone.
  bool all_sha256 = true;
};

struct StampCheck {
  std::string problem;  // the stamp cannot be read (empty when it can)
  ParsedStamp stamp;
  std::vector<std::string> changed, missing, added;
  // The tensors behind each changed record that holds tensor data (tensors_by_record).
  std::map<std::string, std::vector<std::string>> changed_tensors;
  bool root_matches = false;
  // A stamp without digests (written by a host program's export hook) claims
  // nothing to check against.
  bool matches() const {
    if (!problem.empty()) return false;
    return !stamp.has_digests || (changed.empty() && missing.empty() && added.empty() && root_matches);
  }
};

// Exit codes: intact 0, mismatch 1, malformed and unreadable 3 (verify_exit_code).
enum class VerifyOutcome { Intact, Mismatch, Malformed, Unreadable };
int verify_exit_code(VerifyOutcome outcome);

struct VerifyReport {
  std::string path;
  uint64_t file_size = 0;
  FileKind kind = FileKind::TorchScript;
  std::string top_folder;
  std::optional<int64_t> format_version;
  std::optional<int64_t> bytecode_version;
  std::optional<ReadableVersions> readable;  // what the versions were checked against
  std::vector<RecordDigest> records;  // archive order
  uint64_t bytes_hashed = 0;
  bool sha256 = false;  // the records carry their SHA-256 (else CRC-32 alone)
  std::vector<std::string> problems;  // damage: Malformed
  // Intact, but its format or bytecode version is outside what the linked
  // libtorch reads ("written by a newer PyTorch: ..."): Unreadable.
  std::vector<std::string> unreadable;
  std::optional<StampCheck> stamp;    // present when the archive has a stamp
  std::string stamp_record;           // where it is (or would be written)
  bool producer_info = false;         // a producer's own extra/producer_info.json is present
  std::vector<std::string> notes;

  VerifyOutcome outcome() const;
};

// A record only PyTorch 2.x writes (`.data/serialization_id`, `byteorder`), by
// name; empty when there is none. An archive with one was written by a newer
// PyTorch than a libtorch 1.x, even when its format version is one 1.x reads.
std::string pytorch2_record(const TorchArchive& archive);

// The records a libtorch load and save would not write again, by name, in
// archive order: a traced module's traced_inputs (libtorch keeps them only when
// loaded with restore_shapes, which no 1.x has), any record the format layer
// does not know, and what another tool put where libtorch writes its own
// (data/ or constants/ records no tensor is stored in, code/ files that are
// neither Python nor debug info). A re-save must not drop them unnamed.
std::vector<std::string> records_a_resave_drops(const TorchArchive& archive);

// The records of `original` that `copy` (its libtorch re-save) lacks, by
// name: storages are left out (a re-save numbers them anew; the tensors
// behind them are compared by path), and extra files (compared by content).
std::vector<std::string> records_the_copy_lacks(const TorchArchive& original, const TorchArchive& copy);

// Verifies an open TorchScript, lite or .pt2 archive (a .pt2's versions are
// checked against what torch.export.load reads, not the linked libtorch). Damage is reported, not
// thrown; only I/O errors throw.
VerifyReport verify_archive(const TorchArchive& archive, const VerifyOptions& options);

}  // namespace tsarchive
