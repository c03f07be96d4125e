// ZIP record signatures, sizes and field ids shared by the reader
// (zip_layout.cc) and the writer (zip_writer.cc); APPNOTE 6.3.x. Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tsarchive::zipfmt {

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kDescriptorSig = 0x08074b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kEndSize = 22;
constexpr size_t kZip64LocatorSize = 20;
constexpr size_t kZip64EndSize = 56;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kPyTorchPaddingId = 0x4246;  // "FB"
constexpr uint32_t k32Max = 0xFFFFFFFFu;
constexpr uint16_t k16Max = 0xFFFFu;
// External attributes: miniz reads this MS-DOS bit as "a folder", any name.
constexpr uint32_t kDosFolderAttribute = 0x10;

// Little-endian appenders for records the writer and the edit journal make.
inline void put16(std::string& s, uint16_t v) {
  s += static_cast<char>(v & 0xFF);
  s += static_cast<char>(v >> 8);
}
inline void put32(std::string& s, uint32_t v) {
  put16(s, static_cast<uint16_t>(v & 0xFFFF));
  put16(s, static_cast<uint16_t>(v >> 16));
}
inline void put64(std::string& s, uint64_t v) {
  put32(s, static_cast<uint32_t>(v & 0xFFFFFFFFu));
  put32(s, static_cast<uint32_t>(v >> 32));
}
// The same, overwriting the bytes at `at` (which must exist).
inline void set16(std::string& s, size_t at, uint16_t v) {
  s[at] = static_cast<char>(v & 0xFF);
  s[at + 1] = static_cast<char>(v >> 8);
}
inline void set32(std::string& s, size_t at, uint32_t v) {
  set16(s, at, static_cast<uint16_t>(v & 0xFFFF));
  set16(s, at + 2, static_cast<uint16_t>(v >> 16));
}

// CRC-32 as ZIP uses it (zlib's), over any length (format/crc32.h).
uint32_t crc32(std::string_view data);

}  // namespace tsarchive::zipfmt
