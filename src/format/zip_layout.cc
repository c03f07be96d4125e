// Reader for the ZIP structure (format/zip.h for the format).
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "base/error.h"
#include "base/strings.h"
#include "base/utf8.h"
#include "format/zip.h"
#include "format/zip_format.h"

namespace tsarchive {
namespace {

using namespace zipfmt;

[[noreturn]] void invalid(const ByteSource& source, const std::string& what) {
  throw_bad_input("invalid ZIP archive: " + what, source.name(),
                  "the file is damaged or truncated; re-export or re-download it");
}

// A file that ZIP readers could read differently: what tsarchive checks might
// not be what PyTorch loads.
[[noreturn]] void ambiguous(const ByteSource& source, const std::string& what) {
  throw_bad_input("invalid ZIP archive: " + what, source.name(),
                  "ZIP readers could disagree on what this file holds, so PyTorch might load other records than "
                  "the ones checked; re-export it with torch.jit.save");
}

struct EndRecords {
  uint64_t end_offset = 0;
  uint64_t entry_count = 0;
  uint64_t cd_offset = 0;
  uint64_t cd_size = 0;
  uint64_t cd_limit = 0;  // the central directory must end at or before this
  bool zip64 = false;
  std::string comment;
};

constexpr std::string_view kEndSignature("PK\x05\x06", 4);  // kEndSig as bytes

// The last end record signature "PK\5\6" that starts at or before `last` in
// `tail`, or npos. memrchr finds each candidate 'P' (vectorised);
// std::string::rfind calls memcmp at every position, and the whole 64 KiB tail
// is searched for a second end record: 65,557 calls, 0.13 ms on every archive.
size_t rfind_end_signature(std::string_view tail, size_t last) {
  if (tail.size() < kEndSignature.size()) return std::string_view::npos;
  size_t end = std::min(last, tail.size() - kEndSignature.size()) + 1;  // candidates start in [0, end)
  while (end > 0) {
    const void* hit = memrchr(tail.data(), kEndSignature[0], end);
    if (hit == nullptr) break;
    const size_t q = static_cast<size_t>(static_cast<const char*>(hit) - tail.data());
    if (tail.compare(q, kEndSignature.size(), kEndSignature) == 0) return q;
    end = q;
  }
  return std::string_view::npos;
}

// The ZIP64 end record the locator `loc` points at, into `end`; the classic
// record's fields (`entries`, `cd_size`, `cd_offset`) must be its values or
// the 0xFF.. placeholders.
void read_zip64_end(const ByteSource& source, const std::string& loc, uint16_t entries, uint32_t cd_size,
                    uint32_t cd_offset, EndRecords& end) {
  ByteReader lr(loc, "ZIP64 end locator");
  lr.skip(4);
  const uint32_t z64_disk = lr.u32();
  const uint64_t z64_offset = lr.u64();
  const uint32_t total_disks = lr.u32();
  if (z64_disk != 0 || total_disks != 1) invalid(source, "multi-disk archives are not supported (ZIP64 locator)");
  const uint64_t locator_offset = end.end_offset - kZip64LocatorSize;
  uint64_t z64_end = 0;
  if (add_overflows(z64_offset, kZip64EndSize, &z64_end) || z64_end > locator_offset) {
    invalid(source, "ZIP64 end record offset " + std::to_string(z64_offset) + " is outside the file");
  }
  const std::string rec = source.read_string(z64_offset, kZip64EndSize);
  ByteReader zr(rec, "ZIP64 end record");
  if (zr.u32() != kZip64EndSig) invalid(source, "ZIP64 end record signature not found where the locator says");
  if (z64_end != locator_offset) {
    ambiguous(source, "the ZIP64 end record (offset " + std::to_string(z64_offset) +
                          ") does not end where its locator starts (offset " + std::to_string(locator_offset) + ")");
  }
  const uint64_t record_size = zr.u64();
  if (record_size != kZip64EndSize - 12) {
    ambiguous(source, "the ZIP64 end record declares " + std::to_string(record_size) + " bytes, not " +
                          std::to_string(kZip64EndSize - 12) + " (extensible data is not supported)");
  }
  zr.skip(2 + 2);  // versions
  const uint32_t z64_this_disk = zr.u32(), z64_cd_disk = zr.u32();
  const uint64_t here = zr.u64(), total = zr.u64();
  if (z64_this_disk != 0 || z64_cd_disk != 0 || here != total) invalid(source, "multi-disk archives are not supported");
  end.entry_count = total;
  end.cd_size = zr.u64();
  end.cd_offset = zr.u64();
  end.cd_limit = z64_offset;
  end.zip64 = true;
  if ((entries != k16Max && entries != end.entry_count) || (cd_size != k32Max && cd_size != end.cd_size) ||
      (cd_offset != k32Max && cd_offset != end.cd_offset)) {
    ambiguous(source, "the end record and the ZIP64 end record disagree on the central directory (" +
                          std::to_string(entries) + " vs " + std::to_string(end.entry_count) + " entries, offset " +
                          std::to_string(cd_offset) + " vs " + std::to_string(end.cd_offset) + ")");
  }
}

// The end record PyTorch reads, and refusal of every file on which ZIP readers
// could pick another one (see "End record" in zip.h):
// - PyTorch's miniz (mz_zip_reader_locate_header_sig) takes the LAST "PK\5\6"
//   with at least 22 bytes after it, whatever its comment length says; so do we.
// - Its comment length must reach exactly the end of the file. Otherwise bytes
//   follow the archive (or hide in a comment: an archive B appended to A's
//   comment, plus 2 bytes, is what miniz loads while a reader that trusts
//   comment lengths sees A).
// - No other "PK\5\6" after its first byte: Python's zipfile takes the last
//   signature in the file (rfind), even one with fewer than 22 bytes after it.
// - No earlier "PK\5\6" in the searched tail whose comment also reaches the end
//   of the file: a second self-consistent end record, which libzip (it tries
//   every candidate and keeps the "most consistent") or an older reader may pick.
// - The ZIP64 locator, when present, must point at a ZIP64 end record that ends
//   where the locator starts (Python's zipfile looks there, miniz where the
//   locator points), of the standard 44-byte record size, on disk 0 of 1; and
//   each classic field must be its ZIP64 value or the 0xFF.. placeholder
//   (readers without ZIP64 use the classic fields).
EndRecords read_end_records(const ByteSource& source) {
  const uint64_t size = source.size();
  if (size < kEndSize) invalid(source, "too short to be a ZIP (" + std::to_string(size) + " bytes)");
  const uint64_t tail_len = std::min<uint64_t>(size, kEndSize + 0xFFFF);
  const uint64_t tail_start = size - tail_len;
  const std::string tail = source.read_string(tail_start, static_cast<size_t>(tail_len));

  const size_t pos = rfind_end_signature(tail, tail.size() - kEndSize);
  if (pos == std::string::npos) {
    if (has_zip_signature(source)) {
      throw_bad_input("the file starts like a ZIP archive but has no end record: it is truncated", source.name(),
                      "re-export or re-download it");
    }
    invalid(source, "no end of central directory record");
  }
  ByteReader r(std::string_view(tail).substr(pos), "end of central directory record");
  r.skip(4);
  const uint16_t disk = r.u16(), cd_disk = r.u16(), entries_here = r.u16(), entries = r.u16();
  const uint32_t cd_size = r.u32(), cd_offset = r.u32();
  const uint16_t comment_len = r.u16();
  const uint64_t end_offset = tail_start + pos;
  if (comment_len != r.remaining()) {
    ambiguous(source, "the end record at offset " + std::to_string(end_offset) + " declares a " +
                          std::to_string(comment_len) + "-byte comment but " + std::to_string(r.remaining()) +
                          " bytes follow it (data after the archive, or an archive hidden in its comment)");
  }
  if (tail.find(kEndSignature, pos + 1) != std::string::npos) {
    ambiguous(source, "the archive comment holds an end record signature (readers could take it for the end record)");
  }
  for (size_t q = pos; q > 0 && (q = rfind_end_signature(tail, q - 1)) != std::string_view::npos;) {
    ByteReader other(std::string_view(tail).substr(q + kEndSize - 2, 2), "end record candidate");
    if (q + kEndSize + other.u16() == tail.size()) {
      ambiguous(source, "two end records (at offsets " + std::to_string(tail_start + q) + " and " +
                            std::to_string(end_offset) + ") both reach the end of the file");
    }
  }

  EndRecords end;
  end.end_offset = end_offset;
  end.comment = std::string(r.bytes(comment_len));
  end.entry_count = entries;
  end.cd_size = cd_size;
  end.cd_offset = cd_offset;
  end.cd_limit = end.end_offset;
  if (disk != 0 || cd_disk != 0 || entries_here != entries) invalid(source, "multi-disk archives are not supported");

  const bool needs_zip64 = entries == k16Max || cd_size == k32Max || cd_offset == k32Max;
  std::string loc;
  if (end.end_offset >= kZip64LocatorSize) loc = source.read_string(end.end_offset - kZip64LocatorSize, kZip64LocatorSize);
  if (loc.empty() || loc.compare(0, 4, "PK\x06\x07") != 0) {
    if (needs_zip64) invalid(source, "end record needs ZIP64 values but there is no ZIP64 locator");
    return end;
  }
  read_zip64_end(source, loc, entries, cd_size, cd_offset, end);
  return end;
}

// Applies the ZIP64 extended-information field to the 0xFFFFFFFF placeholders.
void apply_zip64_extra(const ByteSource& source, std::string_view extra, ZipEntry& e, bool usize32, bool csize32,
                       bool offset32) {
  ByteReader r(extra, "extra field", e.name);
  while (r.remaining() >= 4) {
    const uint16_t id = r.u16();
    const uint16_t len = r.u16();
    std::string_view body = r.bytes(len);
    if (id != kZip64ExtraId) continue;
    ByteReader z(body, "ZIP64 field", e.name);
    if (usize32) e.uncompressed_size = z.u64();
    if (csize32) e.compressed_size = z.u64();
    if (offset32) e.local_header_offset = z.u64();
    e.zip64 = true;
    return;
  }
  if (usize32 || csize32 || offset32) {
    invalid(source, "entry '" + e.name + "' has 0xFFFFFFFF sizes but no ZIP64 field");
  }
}

bool has_padding_field(std::string_view extra) {
  ByteReader r(extra, "local extra field");
  while (r.remaining() >= 4) {
    const uint16_t id = r.u16();
    const uint16_t len = r.u16();
    if (len > r.remaining()) return false;
    r.skip(len);
    if (id == kPyTorchPaddingId) return true;
  }
  return false;
}

// The local header's sizes from its ZIP64 field (both sizes, in that order, as
// APPNOTE 4.5.3 requires in local headers) when its 32-bit fields say 0xFFFFFFFF.
bool local_zip64_sizes(std::string_view extra, uint64_t* usize, uint64_t* csize) {
  ByteReader r(extra, "local extra field");
  while (r.remaining() >= 4) {
    const uint16_t id = r.u16();
    const uint16_t len = r.u16();
    if (len > r.remaining()) return false;
    std::string_view body = r.bytes(len);
    if (id != kZip64ExtraId) continue;
    if (body.size() < 16) return false;
    ByteReader z(body, "local ZIP64 field");
    *usize = z.u64();
    *csize = z.u64();
    return true;
  }
  return false;
}

// miniz (PyTorch) takes sizes, CRC and method from the central directory and
// only the name and extra lengths from the local header; a streaming reader
// (unzip -, Java's ZipInputStream, some scanners) takes the local header. So
// the local header must say what the central one says: method and encryption
// flag always; CRC and sizes too, except that a zero may stand for them when
// the local flag bit 3 says they follow in a data descriptor (PyTorch 1.13
// writes zeros there; other versions write the real values).
void check_local_fields(const ByteSource& source, const ZipEntry& e, uint16_t flags, uint16_t method, uint32_t crc,
                        uint64_t csize, uint64_t usize) {
  const std::string who = "entry '" + e.name + "'";
  if (method != e.method) {
    ambiguous(source, who + ": the local header says compression method '" + zip_method_name(method) +
                          "', the central directory '" + zip_method_name(e.method) + "'");
  }
  if ((flags & 0x1) != (e.flags & 0x1)) {
    ambiguous(source, who + ": the local header and the central directory disagree on encryption");
  }
  const bool descriptor = (flags & 0x8) != 0;
  auto agrees = [&](uint64_t local, uint64_t central) { return local == central || (descriptor && local == 0); };
  if (!agrees(crc, e.crc32)) {
    ambiguous(source, who + ": the local header's CRC-32 differs from the central directory's");
  }
  if (!agrees(csize, e.compressed_size) || !agrees(usize, e.uncompressed_size)) {
    ambiguous(source, who + ": the local header's sizes (" + std::to_string(csize) + " compressed, " +
                          std::to_string(usize) + " uncompressed) differ from the central directory's (" +
                          std::to_string(e.compressed_size) + ", " + std::to_string(e.uncompressed_size) + ")");
  }
}

// The bytes read_local_header reads first: the fixed part, the name and a
// usual extra field (PyTorch's alignment padding is under 64 bytes); a longer
// extra costs a second read.
uint64_t local_header_guess(const ZipEntry& e) { return kLocalHeaderSize + e.name.size() + 80; }

// `head` holds the bytes from e.local_header_offset on: local_header_guess(e)
// of them or more, or all up to data_limit, and none past it.
void read_local_header(const ByteSource& source, ZipEntry& e, uint64_t data_limit, std::string_view head) {
  uint64_t fixed_end = 0;
  if (add_overflows(e.local_header_offset, kLocalHeaderSize, &fixed_end) || fixed_end > data_limit) {
    invalid(source, "entry '" + e.name + "' has a local header offset outside the archive");
  }
  ByteReader r(head.substr(0, kLocalHeaderSize), "local header", e.name);
  if (r.u32() != kLocalHeaderSig) invalid(source, "no local header where entry '" + e.name + "' should start");
  r.skip(2);  // version needed
  const uint16_t flags = r.u16();
  const uint16_t method = r.u16();
  r.skip(2 + 2);  // DOS time and date
  const uint32_t crc = r.u32();
  const uint32_t csize32 = r.u32(), usize32 = r.u32();
  const uint16_t name_len = r.u16();
  const uint16_t extra_len = r.u16();
  uint64_t data_offset = fixed_end + name_len + extra_len;
  if (data_offset > data_limit) invalid(source, "local header of '" + e.name + "' runs past the central directory");
  const size_t header_size = kLocalHeaderSize + name_len + extra_len;
  std::string longer;  // a header longer than `head`
  if (header_size > head.size()) {
    longer = std::string(head) + source.read_string(e.local_header_offset + head.size(), header_size - head.size());
    head = longer;
  }
  const std::string_view name_and_extra = head.substr(kLocalHeaderSize, name_len + extra_len);
  if (name_and_extra.substr(0, name_len) != e.name) {
    invalid(source, "local and central names differ for entry '" + e.name + "'");
  }
  const std::string_view local_extra = name_and_extra.substr(name_len);
  uint64_t csize = csize32, usize = usize32;
  if ((csize32 == k32Max || usize32 == k32Max) && !local_zip64_sizes(local_extra, &usize, &csize)) {
    ambiguous(source, "entry '" + e.name + "': the local header has 0xFFFFFFFF sizes but no ZIP64 field");
  }
  check_local_fields(source, e, flags, method, crc, csize, usize);
  e.local_extra_length = extra_len;
  e.has_alignment_padding = has_padding_field(local_extra);
  e.data_offset = data_offset;
  uint64_t data_end = 0;
  if (add_overflows(data_offset, e.compressed_size, &data_end) || data_end > data_limit) {
    invalid(source, "entry '" + e.name + "' claims " + std::to_string(e.compressed_size) +
                        " bytes, more than the archive holds");
  }
}

// Every entry's local header, in file order, with one read for each run of
// headers that fits in kWindow bytes: a few reads for thousands of small
// records, one short read per header where records are large.
void read_local_headers(const ByteSource& source, std::vector<ZipEntry>& entries, uint64_t data_limit) {
  constexpr uint64_t kWindow = 64 * 1024;
  std::vector<ZipEntry*> by_offset;
  by_offset.reserve(entries.size());
  for (ZipEntry& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const ZipEntry* a, const ZipEntry* b) { return a->local_header_offset < b->local_header_offset; });
  std::string window;
  uint64_t window_start = 0;
  auto wanted_end = [&](const ZipEntry& e) {
    if (e.local_header_offset >= data_limit) return data_limit;
    return e.local_header_offset + std::min(local_header_guess(e), data_limit - e.local_header_offset);
  };
  for (size_t i = 0; i < by_offset.size(); ++i) {
    ZipEntry& e = *by_offset[i];
    if (e.local_header_offset > data_limit) {
      invalid(source, "entry '" + e.name + "' has a local header offset outside the archive");
    }
    const uint64_t end = wanted_end(e);
    if (e.local_header_offset < window_start || end > window_start + window.size()) {
      uint64_t read_end = end;
      for (size_t j = i + 1; j < by_offset.size(); ++j) {
        const uint64_t next_end = wanted_end(*by_offset[j]);
        if (by_offset[j]->local_header_offset > data_limit || next_end - e.local_header_offset > kWindow) break;
        read_end = std::max(read_end, next_end);
      }
      window_start = e.local_header_offset;
      window = source.read_string(window_start, static_cast<size_t>(read_end - window_start));
    }
    const size_t from = static_cast<size_t>(e.local_header_offset - window_start);
    read_local_header(source, e, data_limit, std::string_view(window).substr(from));
  }
}

// PyTorch names records "<folder>/<record>" with '/' separators; a name that
// could leave a folder when extracted, or that two spellings could share, is
// refused whatever reads it next.
void check_entry_name(const ByteSource& source, const std::string& name) {
  if (name.front() == '/') invalid(source, "entry '" + name + "' has an absolute name");
  if (name.find('\\') != std::string::npos) invalid(source, "entry '" + name + "' has a backslash in its name");
  size_t start = 0;
  while (start < name.size()) {
    size_t slash = name.find('/', start);
    if (slash == std::string::npos) slash = name.size();
    const std::string_view part(name.data() + start, slash - start);
    if (part == ".." || part == ".") invalid(source, "entry '" + name + "' has a '" + std::string(part) + "' part");
    if (part.empty()) invalid(source, "entry '" + name + "' has an empty part ('//')");
    start = slash + 1;
  }
}

// PyTorch looks records up with miniz's mz_zip_reader_locate_file(flags 0):
// a binary search over names compared case-insensitively (ASCII tolower). Of
// DATA.pkl and data.pkl it may load either, while everything else here finds
// names exactly, so names that differ only in ASCII case are refused.
// Also refuses two entries of one name: those fold to the same key too.
void check_names_unique(const ByteSource& source, const std::vector<ZipEntry>& entries) {
  std::unordered_map<std::string, const ZipEntry*> folded;
  folded.reserve(entries.size());
  for (const ZipEntry& e : entries) {
    const auto [it, fresh] = folded.emplace(ascii_lowered(e.name), &e);
    if (!fresh && it->second->name == e.name) invalid(source, "duplicate entry name '" + e.name + "'");
    if (!fresh) {
      ambiguous(source, "entries '" + it->second->name + "' and '" + e.name +
                            "' differ only in case (PyTorch finds records case-insensitively)");
    }
  }
}

// Entries must not share bytes: a local header inside another entry's data is
// how "overlapping" ZIP bombs and parser-confusion files are made.
void check_no_overlaps(const ByteSource& source, const std::vector<ZipEntry>& entries) {
  std::vector<const ZipEntry*> by_offset;
  by_offset.reserve(entries.size());
  for (const ZipEntry& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const ZipEntry* a, const ZipEntry* b) { return a->local_header_offset < b->local_header_offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const ZipEntry& a = *by_offset[i - 1];
    const ZipEntry& b = *by_offset[i];
    if (a.data_offset + a.compressed_size > b.local_header_offset) {  // both checked against the file size
      invalid(source, "entries '" + a.name + "' and '" + b.name + "' overlap");
    }
  }
}

// What other readers see at the start of the file must be the archive:
// - libtorch's getFileFormat() (torch.jit.load, _load_for_lite_interpreter,
//   and torch.load, which hands TorchScript to torch.jit.load) takes a file
//   whose bytes 4 to 7 are "PTMF", the mobile flatbuffer's identifier, for a
//   flatbuffer model before it looks for a ZIP, and runs that model instead;
// - bytes before the first entry, which no entry covers: a file in front of
//   the archive (a flatbuffer, a pickle, a tar) for readers that start at the
//   first byte. No ZIP writer of PyTorch puts any there.
void check_file_start(const ByteSource& source, const ZipLayout& layout) {
  if (source.size() >= 8) {
    char identifier[4];
    source.read_at(4, identifier, 4);
    if (std::memcmp(identifier, "PTMF", 4) == 0) {
      ambiguous(source, "bytes 4 to 7 are 'PTMF', a mobile flatbuffer model's identifier: torch.jit.load, "
                        "_load_for_lite_interpreter and torch.load run the file as a flatbuffer model, not as this "
                        "ZIP archive");
    }
  }
  uint64_t first = layout.central_directory_offset;
  for (const ZipEntry& e : layout.entries) first = std::min(first, e.local_header_offset);
  if (first != 0) {
    ambiguous(source, std::to_string(first) + " bytes before the first entry belong to no entry: readers that "
                      "start at the first byte (a flatbuffer, pickle or tar reader) see another file there");
  }
}

}  // namespace

bool has_zip_signature(const ByteSource& source) {
  if (source.size() < 4) return false;
  char magic[4];
  source.read_at(0, magic, 4);
  return std::memcmp(magic, "PK\x03\x04", 4) == 0 || std::memcmp(magic, "PK\x05\x06", 4) == 0;
}

ZipLayout read_zip_layout(const ByteSource& source) {
  const EndRecords end = read_end_records(source);
  uint64_t cd_end = 0;
  if (add_overflows(end.cd_offset, end.cd_size, &cd_end) || cd_end > end.cd_limit) {
    invalid(source, "central directory (offset " + std::to_string(end.cd_offset) + ", " + std::to_string(end.cd_size) +
                        " bytes) does not fit before the end record");
  }
  // Python's zipfile takes bytes between the central directory and the end
  // records for data prepended to the archive and shifts every offset by them;
  // miniz and libzip do not.
  if (cd_end != end.cd_limit) {
    ambiguous(source, std::to_string(end.cd_limit - cd_end) + " bytes lie between the central directory and the " +
                          (end.zip64 ? "ZIP64 " : "") + "end record");
  }
  if (end.entry_count > end.cd_size / kCentralHeaderSize) {
    invalid(source, "end record claims " + std::to_string(end.entry_count) + " entries, more than the " +
                        std::to_string(end.cd_size) + "-byte central directory can hold");
  }

  ZipLayout layout;
  layout.central_directory_offset = end.cd_offset;
  layout.central_directory_size = end.cd_size;
  layout.end_record_offset = end.end_offset;
  layout.zip64 = end.zip64;
  if (end.zip64) layout.zip64_end_record_offset = end.cd_limit;
  layout.comment = end.comment;
  layout.entries.reserve(static_cast<size_t>(end.entry_count));

  const std::string cd = source.read_string(end.cd_offset, static_cast<size_t>(end.cd_size));
  ByteReader r(cd, "central directory");
  for (uint64_t i = 0; i < end.entry_count; ++i) {
    const size_t record_start = r.offset();
    if (r.u32() != kCentralHeaderSig) invalid(source, "central directory entry " + std::to_string(i) + " is corrupt");
    ZipEntry e;
    e.index = static_cast<uint32_t>(i);
    e.version_made_by = r.u16();
    e.version_needed = r.u16();
    e.flags = r.u16();
    e.method = r.u16();
    e.dos_time = r.u16();
    e.dos_date = r.u16();
    e.crc32 = r.u32();
    const uint32_t csize = r.u32(), usize = r.u32();
    const uint16_t name_len = r.u16(), extra_len = r.u16(), comment_len = r.u16();
    const uint16_t disk = r.u16();
    r.skip(2);  // internal attributes
    const uint32_t external_attributes = r.u32();
    const uint32_t lho = r.u32();
    e.name = std::string(r.bytes(name_len));
    const std::string_view extra = r.bytes(extra_len);
    r.skip(comment_len);
    e.central_offset = end.cd_offset + record_start;
    e.central_size = static_cast<uint32_t>(r.offset() - record_start);
    e.compressed_size = csize;
    e.uncompressed_size = usize;
    e.local_header_offset = lho;
    apply_zip64_extra(source, extra, e, usize == k32Max, csize == k32Max, lho == k32Max);
    if (disk != 0 && disk != k16Max) invalid(source, "multi-disk archives are not supported");
    if (e.flags & 0x1) invalid(source, "entry '" + e.name + "' is encrypted");
    if (e.name.empty()) invalid(source, "central directory entry " + std::to_string(i) + " has an empty name");
    if (e.name.find('\0') != std::string::npos) invalid(source, "an entry name contains a NUL byte");
    // PyTorch writes UTF-8 names; ZIP readers decode other bytes differently
    // (Python's zipfile as CP437, PyTorch's Python reader not at all).
    if (!is_valid_utf8(e.name)) {
      ambiguous(source, "entry name '" + e.name + "' is not UTF-8");
    }
    check_entry_name(source, e.name);
    // miniz (PyTorch's reader) takes an entry whose DOS attributes say
    // "folder" for a folder, whatever its name, and reads none of its bytes:
    // libtorch would get uninitialised memory where a checked record stands.
    // Python's zipfile and libzip go by the name.
    if ((external_attributes & kDosFolderAttribute) != 0 && !e.is_directory()) {
      ambiguous(source, "entry '" + e.name + "' is marked a folder (DOS attribute 0x10) but named as a file");
    }
    layout.entries.push_back(std::move(e));
  }
  // Python's zipfile reads central records until the directory's size is used
  // up, miniz and libzip read as many as the end record counts.
  if (!r.at_end()) {
    ambiguous(source, "the central directory holds " + std::to_string(r.remaining()) + " bytes more than its " +
                          std::to_string(end.entry_count) + " entries");
  }
  read_local_headers(source, layout.entries, end.cd_offset);
  check_names_unique(source, layout.entries);
  check_no_overlaps(source, layout.entries);
  check_file_start(source, layout);
  return layout;
}

std::vector<std::string> read_zip_entry_names(const ByteSource& source) {
  std::vector<std::string> names;
  try {
    const EndRecords end = read_end_records(source);
    if (end.cd_offset > source.size() || end.cd_size > source.size() - end.cd_offset) return names;
    const std::string cd = source.read_string(end.cd_offset, static_cast<size_t>(end.cd_size));
    ByteReader r(cd, "central directory");
    for (uint64_t i = 0; i < end.entry_count && r.remaining() >= kCentralHeaderSize; ++i) {
      if (r.u32() != kCentralHeaderSig) break;
      r.skip(24);
      const uint16_t name_len = r.u16(), extra_len = r.u16(), comment_len = r.u16();
      r.skip(12);
      names.emplace_back(r.bytes(name_len));
      r.skip(size_t(extra_len) + comment_len);
    }
  } catch (const Error&) {
    // what was read stands: the rest is unreadable to every reader
  }
  return names;
}

std::string zip_method_name(uint16_t method) {
  switch (method) {
    case 0: return "stored";
    case 8: return "deflated";
    case 12: return "bzip2";
    case 14: return "lzma";
    case 93: return "zstd";
    default: return "method " + std::to_string(method);
  }
}

}  // namespace tsarchive
