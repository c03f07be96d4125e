// The ZIP container of every PyTorch archive.
//
// Layout facts we rely on (APPNOTE 6.3.x, and caffe2/serialize/inline_container.cc):
//   [local header 30 B | name | extra | data | (data descriptor)]*  central directory
//   [ZIP64 end record 56 B] [ZIP64 locator 20 B] end record 22 B + comment
// - PyTorchStreamWriter always writes the ZIP64 end record and locator, sets flag
//   bit 3 (sizes in a data descriptor) and bit 11 (UTF-8 names), and pads every
//   record's local extra field with an "FB" field so the data starts on a
//   64-byte boundary. Tensor data is stored, code/ over 200 bytes deflated.
// - Local headers may carry zero sizes (bit 3); the central directory is the
//   authority for sizes and CRCs, the local header only for where data starts.
//
// - Local headers may carry zero sizes (bit 3); the central directory is the
//   authority for sizes and CRCs, the local header only for where data starts.
//
// What we accept is what PyTorch (miniz), Python's zipfile and libzip all read
// the same way; a file on which they could disagree is refused ("invalid ZIP
// archive: ...", exit 3), because what tsarchive checks must be what PyTorch loads:
// - End record: the LAST "PK\5\6" with at least 22 bytes after it (miniz's
//   mz_zip_reader_locate_header_sig). Its comment length must reach exactly the
//   end of the file, no other "PK\5\6" may follow its first byte (Python takes
//   the last signature, rfind), and no earlier one in the last 64 KiB + 22 bytes
//   may also have a comment reaching the end (a second consistent end record).
//   An archive hidden in another's comment, or bytes after the archive, fail this.
// - ZIP64: the locator (disk 0 of 1) points at a 44-byte ZIP64 end record that
//   ends where the locator starts (Python looks there, miniz where the locator
//   points); each classic end-record field is its ZIP64 value or 0xFF.. .
// - Central directory: it ends where the (ZIP64) end record starts (Python
//   shifts every offset by bytes in between) and holds exactly the counted
//   records (miniz and libzip read the count, Python reads up to the size).
// - Names: miniz finds records case-insensitively (ASCII tolower, flags 0), so
//   two names equal after ASCII lower-casing are refused, like exact duplicates.
// - Local headers: name, compression method and encryption flag equal the
//   central ones; CRC and sizes too, except zeros with flag bit 3 (PyTorch 1.13
//   writes zeros and a data descriptor; other writers the real values).
//
// ZipLayout is read by our own parser because libzip does not expose local
// header offsets or extra fields by offset. Entry *content* is read by
// ZipEntryReader from exactly [data_offset, data_offset + compressed_size),
// inflated with zlib, bounded by the declared size and CRC-checked, so it is
// the bytes this layout (= miniz's) points at. libzip is a second, independent
// parser: the first content read opens it once and refuses the archive when its
// entry table or comment differs from ours (ZipArchive::cross_check).
// Not supported (rejected as invalid): multi-disk archives, encryption.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "format/byte_source.h"

namespace tsarchive {

struct ZipEntry {
  std::string name;
  uint32_t index = 0;  // position in the central directory
  uint16_t version_made_by = 0;
  uint16_t version_needed = 0;
  uint16_t flags = 0;
  uint16_t method = 0;  // 0 stored, 8 deflated
  uint16_t dos_time = 0;
  uint16_t dos_date = 0;
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint64_t local_header_offset = 0;
  uint64_t data_offset = 0;     // first byte of the (compressed) data
  uint64_t central_offset = 0;  // where its central directory record starts
  uint32_t central_size = 0;    // length of that record (46 + name + extra + comment)
  uint16_t local_extra_length = 0;
  bool has_alignment_padding = false;  // local extra has PyTorch's "FB" field
  bool zip64 = false;                  // central record used ZIP64 extended info

  bool stored() const { return method == 0; }
  bool is_directory() const { return !name.empty() && name.back() == '/'; }
};

struct ZipLayout {
  std::vector<ZipEntry> entries;
  uint64_t central_directory_offset = 0;
  uint64_t central_directory_size = 0;
  uint64_t end_record_offset = 0;  // offset of the classic end record
  uint64_t zip64_end_record_offset = 0;  // offset of the ZIP64 end record, when zip64
  bool zip64 = false;
  std::string comment;
};

// True when the source starts with a local file header or an empty-archive end record.
bool has_zip_signature(const ByteSource& source);

// Parses the end records, the central directory and every local header.
// Throws Error(BadInput) naming the problem for anything inconsistent.
ZipLayout read_zip_layout(const ByteSource& source);

// The names of a ZIP's central directory, as they are, for a file that
// read_zip_layout refuses: what other readers would make of them. Reads the
// end records and the central directory only and stops at the first record it
// cannot read; nothing when it finds no end record. Never throws BadInput.
std::vector<std::string> read_zip_entry_names(const ByteSource& source);

// Human name of a compression method ("stored", "deflated", "method 93").
std::string zip_method_name(uint16_t method);

// What reading one entry's content found.
struct ZipContentCheck {
  uint64_t size = 0;     // uncompressed bytes handed to the sink
  bool crc_ok = false;   // the content matches the central CRC-32
  std::string problem;   // why the content is damaged; empty when it is not
};

// Streams entries' uncompressed content: exactly the bytes [data_offset,
// data_offset + compressed_size) of the source, stored or inflated with zlib
// (raw deflate), in chunks of at most 1 MiB to the sink, never more than the
// declared uncompressed size (a bomb or a lying size stops there); the size and
// CRC-32 are checked at the end. Damage is reported in `problem` (the sink may
// have seen some bytes by then); only I/O errors throw. Reuses its buffers, so
// keep one per thread.
class ZipEntryReader {
 public:
  using Sink = std::function<void(const unsigned char* data, size_t size)>;
  explicit ZipEntryReader(const ByteSource& source);
  // `stored_into`: for a stored entry, room for all of its content, which is
  // then read there in one piece (and handed to the sink from there) instead
  // of through the reader's own buffer.
  ZipContentCheck read(const ZipEntry& entry, const Sink& sink, unsigned char* stored_into = nullptr);
  // A stored entry of several chunks then has its CRC-32 computed on a second
  // thread while the sink takes the same chunk on this one (two buffers in
  // turn): for a caller whose sink is as costly as the CRC (SHA-256) and that
  // has a core to spare, e.g. one huge record.
  void crc_beside_sink(bool on) { crc_beside_sink_ = on; }

 private:
  void read_stored_crc_beside(const ZipEntry& entry, const Sink& sink, uint32_t& crc, ZipContentCheck& out);

  const ByteSource& source_;
  std::vector<unsigned char> in_, out_, second_;
  bool crc_beside_sink_ = false;
};

// An open ZIP: its layout, and content reads by ZipEntryReader.
class ZipArchive {
 public:
  explicit ZipArchive(std::unique_ptr<ByteSource> source);
  ~ZipArchive();
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;

  const ByteSource& source() const { return *source_; }
  const ZipLayout& layout() const { return layout_; }
  const std::vector<ZipEntry>& entries() const { return layout_.entries; }
  const ZipEntry* find(std::string_view name) const;

  // The uncompressed content of `entry`, with its CRC checked. Refuses entries
  // whose declared size exceeds `max_size`, and content that is longer or
  // shorter than declared (a lying size or a decompression bomb).
  // Calls cross_check() first.
  std::string read(const ZipEntry& entry, uint64_t max_size) const;
  // The same checks, the content handed to `sink` in chunks as it is read, so
  // memory stays bounded. The sink may see bytes of a record that then fails
  // its CRC or size check (the call throws after them).
  void read_to(const ZipEntry& entry, uint64_t max_size, const ZipEntryReader::Sink& sink) const;

  // Opens the file with libzip, a second ZIP parser (loaded at the first
  // call in the process, format/libzip.h), and throws Error(BadInput) when its
  // entries (count, names, sizes, CRCs, methods, encryption) or the archive
  // comment differ from our layout. Once per archive (the first call; later
  // calls return at once); thread-safe. Every content read calls it.
  void cross_check() const;

 private:
  void read_checked(const ZipEntry& entry, uint64_t max_size, const ZipEntryReader::Sink& sink,
                    unsigned char* stored_into) const;

  std::unique_ptr<ByteSource> source_;
  ZipLayout layout_;
  mutable std::mutex cross_check_mutex_;
  mutable bool cross_checked_ = false;
};

}  // namespace tsarchive
