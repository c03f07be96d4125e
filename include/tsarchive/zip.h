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
// ZipLayout is read by our own parser because libzip does not expose local
// header offsets or extra fields by offset; entry *content* is read through
// libzip (ZipArchive::read), which inflates and checks the CRC.
// Not supported (rejected as invalid): multi-disk archives, encryption.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tsarchive/byte_source.h"

struct zip;  // libzip

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

// Human name of a compression method ("stored", "deflated", "method 93").
std::string zip_method_name(uint16_t method);

// An open ZIP: its layout, and content reads through libzip.
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
  std::string read(const ZipEntry& entry, uint64_t max_size) const;

 private:
  struct zip* libzip() const;

  std::unique_ptr<ByteSource> source_;
  ZipLayout layout_;
  mutable struct zip* zip_ = nullptr;  // opened on the first read
};

}  // namespace tsarchive
