// extra/ files of a TorchScript archive or a .pt2: listing them, checking
// names, and planning edits that keep every other record byte-for-byte.
// torch.export.save(..., extra_files=) writes "<top>/extra/<name>" too, and
// torch.export.load(..., extra_files=) reads back every record under extra/
// (torch/export/pt2_archive/_package.py, _load_extra_files), as UTF-8 text.
//
// torch.jit.save(..., _extra_files={"name": bytes}) writes "<top>/extra/<name>";
// libtorch can read one back only by its exact name (ExtraFilesMap). Names are
// relative paths: "labels.json", "config/train.yaml".
//
// Where an edit puts things (zip_writer.h says how the bytes are written):
// - a new name is appended after the last record, so nothing else moves;
// - a new value for an existing name replaces that record where it is, and
//   the records after it move (re-aligned when they move by a non-multiple of
//   64 bytes);
// - a value equal to the current one changes nothing;
// - removing a name drops its record; adding then removing a name gives back
//   the original bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/archive.h"
#include "format/zip_writer.h"

namespace tsarchive {

// Documented limits (man page, "extra").
struct ExtraLimits {
  static constexpr uint64_t kValue = 64ull << 20;         // per file, unless --force
  static constexpr uint64_t kValueForced = 0xFFFFFFFEull;  // what the ZIP writer can store
  static constexpr size_t kName = 1024;                    // bytes, whole name
  static constexpr size_t kComponent = 255;                // bytes, each '/'-separated part
};

// Why `name` cannot be an extra file name (empty optional when it can): empty,
// too long, absolute, a '..' or '.' part, empty parts, a backslash, a drive
// letter, NUL or other control bytes, or not UTF-8. The same rule keeps
// `extra export` inside its folder.
std::optional<std::string> extra_name_problem(std::string_view name);

struct ExtraFileInfo {
  std::string name;  // without the "extra/" prefix
  uint64_t size = 0;
  bool text = false;    // valid UTF-8 without control bytes other than whitespace
  bool json = false;    // parses as JSON (within JsonLimits, bounded_json.h)
  std::string json_problem;  // why JSON-looking text was not parsed ("JSON nested deeper than 512 levels")
  std::string preview;  // first line of text, shortened; empty for binary
};

// Fills text, json, json_problem and preview of `info` from a file's bytes.
void describe_extra_content(std::string_view bytes, ExtraFileInfo& info);

// The extra files in file order, with a preview of those up to 1 MiB.
std::vector<ExtraFileInfo> list_extra_files(const TorchArchive& archive);

// The record of extra/<name>, or Error(BadInput) listing the names there are.
const Record& find_extra_file(const TorchArchive& archive, std::string_view name);

// Reads extra/<name>, refusing content above `max_size`.
std::string read_extra(const TorchArchive& archive, std::string_view name, uint64_t max_size);
// The same, in chunks as they are read (bounded memory; see ZipArchive::read_to).
void stream_extra(const TorchArchive& archive, std::string_view name, uint64_t max_size,
                  const ZipEntryReader::Sink& sink);

// One requested change: a value to set, or no value to remove the name.
struct ExtraEdit {
  std::string name;
  std::optional<std::string> value;
  // Carried as it is from another archive (trace, convert): the name and a
  // .json value are not checked, since nothing about them is new.
  bool carried = false;
};

enum class ExtraChange { Added, Replaced, Unchanged, Removed, Missing };
std::string_view extra_change_id(ExtraChange change);  // "added", ...

struct ExtraChangeInfo {
  std::string name;
  ExtraChange change;
  uint64_t old_size = 0;  // Replaced, Unchanged, Removed
  uint64_t new_size = 0;  // Added, Replaced, Unchanged
};

struct ExtraEditPlan {
  std::vector<ExtraChangeInfo> changes;  // in the order requested
  ZipRewritePlan zip;
  // Entries kept as they are whose names have characters escape_text
  // escapes (control, C1, bidi, not UTF-8): full ZIP names, in file order.
  std::vector<std::string> kept_unsafe_names;
};

// Plans `edits` (applied in order; a later edit of a name wins). Removing a
// name the archive lacks is Error(BadInput) unless `missing_ok`. Names must
// pass extra_name_problem (Error(Usage) otherwise), except a removal of a
// name the archive has. A removal may also give a name as escape_text shows
// it ("a\x1bb" for a, ESC, b) when no extra file has that exact name; two
// files shown alike are Error(BadInput). A value for a name ending in ".json"
// must be within JsonLimits::kDepth (bounded_json.h; Error(Usage)). In a
// .pt2 every value must be UTF-8 (Error(Usage)): torch.export.load decodes
// each extra file as text.
ExtraEditPlan plan_extra_edits(const TorchArchive& archive, std::vector<ExtraEdit> edits, bool missing_ok);

struct ExportedFile {
  std::string name;
  std::string path;
  uint64_t size = 0;
};

// What extra export may write. An archive is anyone's file: an extra file
// named ".git/config" (core.fsmonitor runs a command) or ".bashrc", or named
// like the archive itself, verifies intact, so export never replaces a file or
// writes a hidden name unless asked.
struct ExportRules {
  uint64_t max_size = ExtraLimits::kValue;  // content above it is refused
  // Replace existing files, and write names with a part that starts with '.'
  // (.git/config, .ssh/authorized_keys); without it both are Error(Usage).
  bool force = false;
  // The archive's own file (st_dev, st_ino): no name may replace it, even
  // with `force` (the export would destroy what it reads).
  std::optional<std::pair<uint64_t, uint64_t>> archive_file;
};

// Writes every extra file below `dir` (created if missing), "a/b" as dir/a/b,
// each file atomically. All names are checked before anything is written
// (nothing half-exported): links and special files in the way are refused
// (Error(Io)), names that are not safe paths are Error(BadInput), existing
// files and hidden names as `rules` says (Error(Usage)).
std::vector<ExportedFile> export_extra_files(const TorchArchive& archive, const std::string& dir,
                                             const ExportRules& rules);

// Every regular file below `dir` as an edit setting it, "a/b" for dir/a/b, in
// name order. Links and special files are Error(BadInput); files above
// `max_size` Error(Usage).
std::vector<ExtraEdit> read_extra_folder(const std::string& dir, uint64_t max_size);

}  // namespace tsarchive
