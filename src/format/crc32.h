// CRC-32 (the ZIP/gzip polynomial, reflected 0xEDB88320), as zlib's crc32()
// computes it: every record's content is checked against it, so on a large
// stored record it runs over as many bytes as SHA-256 does. On x86-64 with
// PCLMULQDQ it folds 64 bytes a step with carry-less multiplies (several
// times zlib's table speed, so the check hides behind the hash); elsewhere,
// and for short tails, it is zlib's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tsarchive {

// The CRC-32 of `data` continued from `crc` (0 to start), as zlib's crc32_z.
uint32_t crc32_update(uint32_t crc, const void* data, size_t n);

inline uint32_t crc32_of(std::string_view data) { return crc32_update(0, data.data(), data.size()); }

}  // namespace tsarchive
