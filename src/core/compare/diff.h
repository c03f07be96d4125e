// `diff` as data: what changed from one TorchScript archive to another, read
// without libtorch and without executing anything. Rendering lives in the CLI.
//
// What is compared, and how equality is decided:
// - Records, by name below each archive's top folder. The top folder's own
//   name, the order of records and ZIP details (times, compression,
//   padding) are not content: a different top folder or order is a note.
//   A record changed when its uncompressed size or CRC-32 differs (read from
//   the central directory: an intact record whose CRC differs cannot hold the
//   same bytes; a damaged one is an error on read, as everywhere, and two
//   records of the same size and CRC-32 whose bytes differ are damage in one
//   of them: Error(BadInput) naming it, never a change). When both
//   match, equality is not taken from a 32-bit checksum for what we can
//   afford to read: records up to DiffOptions::byte_compare_limit (64 MiB;
//   `--full`: no limit) are compared byte for byte, stored ones in 1 MiB
//   chunks, deflated ones (code/, at most 256 MiB) inflated. Larger records
//   count as equal by size and CRC-32, and are counted as such
//   (`records_equal_by_crc`), so the report says what it did not read.
// - The archives differ exactly when a record was added, removed or changed.
//   Everything below explains such changes; none of it decides the answer.
// - Tensors (unless --no-tensors), by path from data.pkl and constants.pkl
//   (model.h): added, removed, dtype or shape changed, values compared
//   element by element (tensor_values.h) when the dtype and shape agree;
//   layout (stride, storage offset) or device only when every value is
//   equal. What the pickle reader could not make sense of (model.h
//   `problems`) becomes a note, so a skipped tensor is not taken for a
//   removed one. A
//   tensor is not read when its storage record is unchanged (same name,
//   same content) and its layout is the same.
// - Code (unless --no-code): each code/**.py record added, removed or changed
//   as a unified diff (text_diff.h). *.debug_pkl records are listed among the
//   records only.
// - extra/: names added, removed or changed, with sizes.
// - A .pt2 (torch.export, AOTInductor) is compared the same way: its records,
//   its extra/ files, and its parameters, buffers and constants by name from
//   the weights and constants configs (pt2_tensors in format/pt2.h), values
//   read from their data/weights and data/constants records. Names are FQNs,
//   as in a TorchScript archive's state dict, so an archive and its
//   torch.export counterpart compare tensor by tensor. A changed program
//   (models/<model>.json, one long JSON line) is shown as a unified diff of
//   its graph as `inspect --graph` prints it (pt2_graph.h), among `code`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/archive.h"
#include "format/model.h"
#include "core/compare/tensor_values.h"
#include "core/compare/text_diff.h"

namespace tsarchive {

struct DiffOptions {
  static constexpr uint64_t kDefaultByteCompareLimit = 64ull << 20;
  static constexpr uint64_t kInflateCompareLimit = 256ull << 20;  // deflated records held in memory to compare
  uint64_t byte_compare_limit = kDefaultByteCompareLimit;
  bool tensors = true;
  bool code = true;
  // Records left out of the comparison in both archives: "did the model
  // change?" without its provenance. ignore_stamp: tsarchive's stamp
  // (verify.h locate_stamp: extra/producer_info.json when tsarchive wrote it,
  // extra/tsarchive/producer_info.json); ignore_extra: every extra/ file.
  bool ignore_stamp = false;
  bool ignore_extra = false;
  TextDiffLimits text;
};

enum class Change { Added, Removed, Changed };
std::string_view change_id(Change change);  // "added", "removed", "changed"

struct RecordChange {
  std::string name;  // below the top folder
  RecordKind kind = RecordKind::Other;
  Change change = Change::Changed;
  uint64_t old_size = 0;  // Removed, Changed
  uint64_t new_size = 0;  // Added, Changed
  uint32_t old_crc32 = 0;
  uint32_t new_crc32 = 0;
  // Tensor records (Changed, Added): an old tensor record of another name with
  // this size and CRC-32, i.e. a storage that was renumbered, not changed.
  std::string same_as_old;
};

struct TensorChange {
  std::string path;
  Change change = Change::Changed;
  TensorInfo old_tensor;  // empty when Added
  TensorInfo new_tensor;  // empty when Removed
  // Changed: what changed. Values are compared only when dtype and shape agree.
  bool dtype_changed = false;
  bool shape_changed = false;
  bool layout_changed = false;  // stride or storage offset
  bool device_changed = false;  // saved from another device ("cpu", "cuda:0")
  TensorValueDiff values;       // values.compared false: not read (see values.note)
};

struct CodeChange {
  std::string record;
  Change change = Change::Changed;
  bool text = true;  // both sides are UTF-8 text; else only "binary content differs"
  TextDiff diff;
};

struct ExtraFileChange {
  std::string name;  // without "extra/"
  Change change = Change::Changed;
  uint64_t old_size = 0;
  uint64_t new_size = 0;
};

struct DiffSide {
  std::string path;
  FileKind kind = FileKind::TorchScript;
  std::string top_folder;
  uint64_t file_size = 0;
  size_t records = 0;
  size_t tensors = 0;
};

struct ArchiveDiff {
  DiffSide old_side;
  DiffSide new_side;
  std::vector<std::string> notes;

  std::vector<RecordChange> records;  // old archive order, then added ones in new order
  std::vector<std::string> records_ignored;  // by ignore_stamp/ignore_extra, in either archive (sorted)
  size_t records_compared = 0;        // names in both archives
  size_t records_equal_by_crc = 0;    // ... taken as equal by size and CRC-32 only (above the limit)
  uint64_t bytes_equal_by_crc = 0;

  bool tensors_compared = false;       // DiffOptions::tensors
  std::vector<TensorChange> tensors;   // changed, removed (old order), then added (new order)
  size_t tensors_matched = 0;          // paths in both archives
  size_t tensors_unread = 0;           // ... whose storage record and layout were unchanged

  bool code_compared = false;  // DiffOptions::code
  std::vector<CodeChange> code;
  std::vector<ExtraFileChange> extra;

  bool same() const { return records.empty(); }
  // The largest max abs difference over the changed tensors, if any was measured.
  std::optional<double> max_abs_diff() const;
};

// Compares two open archives (TorchScript, lite-interpreter or .pt2).
ArchiveDiff diff_archives(const TorchArchive& old_archive, const TorchArchive& new_archive, const DiffOptions& options);

// Opens both files (refusing anything but TorchScript archives and .pt2 with
// Error(BadInput): "cannot diff this file: it is a torch.save file ...")
// and compares them.
ArchiveDiff diff_files(const std::string& old_path, const std::string& new_path, const DiffOptions& options);

}  // namespace tsarchive
