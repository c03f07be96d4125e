// Content digests of archive records, and the CRC-32 check, in one pass.
//
// A record's digest is SHA-256 over its *uncompressed* content, so it does not
// depend on how a writer chose to compress or align it. The root digest is
// SHA-256 over the manifest text
//     <sha256 hex>  <record name>\n      (one line per record, names sorted bytewise)
// which is what `sha256sum` prints for the extracted records, with names
// relative to the archive's top folder.
//
// Records are independent, so they are hashed on several threads, largest
// first; each record is read once, in chunks, by ZipEntryReader (zip.h: the
// bytes our layout points at, inflated, bounded by the declared size, so a
// decompression bomb costs no more than its declared size, CRC-checked) while
// SHA-256 is fed. libzip must agree with the layout first (cross_check).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "format/archive.h"

namespace tsarchive {

struct RecordDigest {
  std::string name;     // relative to the top folder
  uint64_t size = 0;    // uncompressed bytes read
  std::string sha256;   // lowercase hex; empty when the record could not be read
  bool crc_ok = false;  // the content matches the CRC-32 of the central directory
  std::string problem;  // why the record is damaged (empty when it is not)
};

struct DigestOptions {
  unsigned threads = 0;  // 0: one per core
  // Records whose names are skipped (e.g. the stamp itself).
  std::vector<std::string> exclude;
  // Of what kinds (format/archive.h) records are digested; empty: every kind.
  std::vector<RecordKind> kinds;
  // false: check content (CRC-32, sizes) without SHA-256; `sha256` stays empty.
  bool sha256 = true;
  // Only records whose local header starts at or after this offset (an
  // --in-place edit rewrites just those).
  uint64_t from_offset = 0;
};

// Digests of every record of `archive` (directories skipped), in archive order.
// Damaged content is reported per record in `problem`; only I/O failures throw.
std::vector<RecordDigest> digest_records(const TorchArchive& archive, const DigestOptions& options = {});

// Root digest over (name, sha256 hex) pairs, see above. The pairs need not be sorted.
std::string root_digest(std::vector<std::pair<std::string, std::string>> digests);

std::string sha256_hex(std::string_view bytes);

// SHA-256 hex of all of `source`, 1 MiB at a time.
std::string sha256_source_hex(const ByteSource& source);

}  // namespace tsarchive
