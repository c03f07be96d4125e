// The second half of every libtorch save the tool makes (stamp, trace,
// convert): libtorch has written the archive into a StagingFolder, with
// extra/producer_info.json from the export hook (all but the digests, which
// only exist once the records are written). The core opens the staged copy,
// checks it like any input (operations/gate.h), digests its records, and writes it to
// its destination with the final stamp through the alignment-keeping extra/
// writer and ArchiveFile's atomic replace.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/provenance/digest.h"
#include "core/edit/extra.h"
#include "core/edit/file_edit.h"
#include "core/provenance/producer_info.h"
#include "core/provenance/signing.h"
#include "operations/worker_settings.h"

namespace tsarchive {

// (name, sha256) of every record but the stamp (`stamp_record`, e.g.
// "extra/producer_info.json"); Error(BadInput) for a record that could not be
// read.
std::vector<std::pair<std::string, std::string>> digests_without_stamp(const std::vector<RecordDigest>& records,
                                                                       const std::string& file,
                                                                       const std::string& stamp_record = kStampRecord);

// What goes into the staged copy besides the stamp: the extra files carried
// over from the original (convert, trace: libtorch's save wrote none of them),
// and where the stamp goes (kStampAltName beside a producer's own
// producer_info.json).
struct StagedExtras {
  std::vector<ExtraEdit> carried;
  std::string stamp_name = kStampName;
  // Sign the result too (stamp --sign-key): the embedded signature goes in
  // with the stamp, in the same write.
  const SignerKeys* sign = nullptr;
  // (record name, sha256) of the original's extra files that libtorch's save
  // carried (stamp): the copy must hold each, unchanged, and no other but the
  // stamp. The worker that wrote the copy runs the model's code; what it wrote
  // is not taken on trust.
  std::optional<std::vector<std::pair<std::string, std::string>>> kept;
  // The settings the original passed the gate with (operations/gate.h): the
  // copy's load-safety verdict is taken as the original's was, since the
  // worker that wrote it ran the model's code. Null: not judged (tests).
  const WorkerSettings* judged_as = nullptr;
  // The original, when the copy must hold its tensors, path by path, with the
  // same dtype, shape and values (stamp: a re-save changes how records are
  // named and laid out, never a weight).
  const TorchArchive* tensors_of = nullptr;
};

struct StagedStamp {
  WriteResult result;
  std::string stamp;  // the final extra/producer_info.json
  std::optional<int64_t> format_version;  // of the archive libtorch wrote
  std::string signer;  // with StagedExtras::sign: who signed
};

// About the size of the archive libtorch saves from `archive`, for the room
// a StagingFolder asks for: it writes every record stored, so a deflated one
// takes its inflated size (a 200 KB archive of deflated zeros may be a
// 200 MB copy).
uint64_t resaved_size(const TorchArchive& archive);

// `staged`: the file libtorch wrote; `file`: the archive it was made from
// (locked); `output`: where to write, empty to replace `file`;
// `expected_top`: the top folder the copy must have (libtorch names it after
// the staged file's stem); `display`: the name for messages.
StagedStamp write_staged_with_stamp(ArchiveFile& file, const std::string& staged, StampContent content,
                                    const std::string& output, const std::string& expected_top, const std::string& display,
                                    StagedExtras extras = {});

}  // namespace tsarchive
