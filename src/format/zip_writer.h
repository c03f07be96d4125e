// Rewriting a ZIP archive while keeping every entry that is not edited
// byte-for-byte (see zip.h for the layout).
//
// A rewrite is planned first, as a list of pieces that are either byte ranges
// of the source or bytes made here; the plan is then written to a new file, or
// only its changed tail is written over the old file (--in-place). Planning
// never writes, so a failed plan leaves nothing behind.
//
// How entries are written:
// - A kept entry is its source span [local header, next local header) copied
//   verbatim: header, name, extra field, data and data descriptor. When it
//   moves by a multiple of 64 bytes (or does not move) nothing changes. When it
//   moves otherwise and its local extra field has PyTorch's "FB" padding, the
//   local header is rebuilt with the FB padding PyTorch's writer would choose
//   at the new offset (other extra fields kept, in order), so its data stays
//   64-byte aligned; name, data, descriptor and central record stay the same.
// - Its central record is copied verbatim, with only the local header offset
//   changed when the entry moved (in the ZIP64 field when it uses one).
// - A new entry is written the way PyTorchStreamWriter writes a record: stored,
//   flags 0x0808 (data descriptor, UTF-8 name), DOS time and date 0, an FB
//   field padding its data to 64 bytes, then a descriptor with the CRC-32 and
//   sizes. Entries of 4 GiB or more are not written here.
// - The end records are the source's, with counts, sizes and offsets updated;
//   a ZIP64 end record and locator are kept when the source has them, and
//   added when the counts or offsets need them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "format/zip.h"

namespace tsarchive {

// One entry of the archive to write, in file order.
struct ZipEntrySpec {
  const ZipEntry* existing = nullptr;  // copy this entry of the source...
  std::string name;                    // ...or write a new stored entry with this full name
  std::string data;                    // and this content

  static ZipEntrySpec keep(const ZipEntry& entry) { return ZipEntrySpec{&entry, {}, {}}; }
  static ZipEntrySpec create(std::string name, std::string data) {
    return ZipEntrySpec{nullptr, std::move(name), std::move(data)};
  }
};

struct ZipPiece {
  bool from_source = false;
  uint64_t source_offset = 0;  // when from_source
  uint64_t length = 0;
  std::string bytes;  // when made here; length == bytes.size()
};

struct ZipRewritePlan {
  std::vector<ZipPiece> pieces;
  uint64_t size = 0;                // of the archive the plan writes
  uint64_t entries_kept = 0;        // copied byte-for-byte
  uint64_t entries_realigned = 0;   // copied with a new FB padding (same data)
  uint64_t entries_written = 0;     // new
  // First offset at which the planned archive differs from the source; equals
  // both sizes when they are identical.
  uint64_t first_change = 0;

  // The plan, written over a source of `source_size` bytes, would change nothing.
  bool identical_to(uint64_t source_size) const { return size == source_size && first_change == size; }
  bool identical_to(const ByteSource& source) const { return identical_to(source.size()); }
};

// Plans an archive holding `entries` in this order. The source layout must
// come from read_zip_layout over `source`. Throws Error(BadInput) for entries
// that overlap in the source, Error(Usage) for a new entry that is too large.
ZipRewritePlan plan_zip_rewrite(const ByteSource& source, const ZipLayout& layout,
                                const std::vector<ZipEntrySpec>& entries);

// Reads `length` bytes of the source at `offset` into `out`.
using SourceReader = std::function<void(uint64_t offset, char* out, size_t length)>;

// The planned bytes from `offset` to the end, in memory (for the --in-place tail).
std::string render_plan(const ZipRewritePlan& plan, uint64_t offset, const SourceReader& read_source);

// Writes the whole plan to `dest_fd` from its current position, copying source
// ranges from `source_fd` with copy_file_range where the kernel can (a clone
// on filesystems with reflinks). Throws Error(Io) naming `dest_name`.
void write_plan(const ZipRewritePlan& plan, int source_fd, int dest_fd, const std::string& dest_name);

// Whether the plan, written over its own source of `source_size` bytes, leaves
// every byte it copies where it is: the same size, each source range at its
// own offset (an entry's data replaced by as many bytes, its CRC-32 changed).
bool plan_keeps_offsets(const ZipRewritePlan& plan, uint64_t source_size);
// Writes only the bytes the plan makes, over the source file itself, at their
// offsets (plan_keeps_offsets must hold); returns how many. Throws Error(Io).
uint64_t write_plan_over_source(const ZipRewritePlan& plan, int fd, const std::string& name);

// The 64-byte alignment PyTorch gives record data.
inline constexpr uint64_t kRecordAlignment = 64;

}  // namespace tsarchive
