// `stamp` as an operation.
//
// Two ways to write extra/producer_info.json (producer_info.h):
// - default: libtorch loads the module and saves it again while the export
//   hook supplies the stamp (the mechanism of PyTorch's deployment note). The
//   copy is staged next to the output, loaded back and compared with the
//   original (parameters, buffers, extra files); then the record digests of
//   the copy, known only once it is written, are put into its stamp through
//   the alignment-keeping extra/ writer, and it replaces the output.
// - --keep-bytes (and lite-interpreter archives, which a re-save would turn
//   into full ones, and archives with records a re-save would not write
//   again, e.g. traced_inputs): the stamp goes in through the extra/ writer
//   alone; every other record stays byte-identical and libtorch is never loaded.
// Either way the archive must pass the structural checks first (the gate,
// core/provenance/checked_archive.h): stamping a damaged archive would bless the damage.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/provenance/signing.h"
#include "operations/notes.h"
#include "operations/worker_settings.h"

namespace tsarchive {

struct StampSettings {
  std::string model;
  std::string output;  // empty: replace the model
  std::map<std::string, std::string> fields;  // --field KEY=VALUE, checked (stamp_field_problem)
  bool host = true;    // the host name and user in the stamp
  bool git = true;     // the working directory's git checkout in the stamp
  bool keep_bytes = false;
  // With keep_bytes and no output: rewrite only the end of the model, journaled
  // (ArchiveFile::write_in_place), instead of a whole new copy and its fsync.
  bool in_place = false;
  double lock_timeout = 10;
  const SignerKeys* signer = nullptr;  // --sign-key: also sign (embedded), in the same write
  WorkerSettings worker;
};

struct StampResult {
  bool keep_bytes = false;   // how it was stamped: asked, or decided (a note says why)
  std::string stamp_record;  // where the stamp went
  bool replaced_previous = false;
  bool producer_kept = false;  // a producer's own producer_info.json was kept; the stamp went beside it
  std::optional<int64_t> version_before, version_after;  // format versions
  std::vector<std::string> notes;
  std::string stamp;  // the extra/producer_info.json written
  uint64_t size = 0;  // of the archive written
  std::string signer;  // --sign-key: who signed
};

// Throws Error for what stops it (a damaged archive, a failed re-save); then
// nothing was written.
StampResult stamp_archive(const StampSettings& settings, const NoteSink& notes);

}  // namespace tsarchive
