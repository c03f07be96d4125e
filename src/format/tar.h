// The members of a tar file, as Python's tarfile lists them.
//
// torch.load still reads the legacy tar format of PyTorch 0.1-0.3: before any
// other format it tries tarfile.open(fileobj=f, mode="r:"), and when that
// works it unpickles the members 'storages', 'tensors' and 'pickle'. So what
// a tar file would run depends on which members *tarfile* sees, and this
// reader copies the rules of CPython 3.11's tarfile.py that decide it:
//   - a header is a 512-byte block whose checksum field (an octal number as
//     int(text, 8) reads it, or base-256) equals the sum of the block's bytes,
//     unsigned or signed, with that field counted as spaces; every numeric
//     field must read (nti), or the header is invalid;
//   - the first header decides whether the file is a tar at all; a later
//     invalid, zero or short header ends the member list without an error;
//   - a member's name is the ustar prefix, '/', and the name (a directory's
//     trailing slashes dropped); a GNU 'L' header or a PAX 'path' record
//     replaces it, and a PAX 'size' record replaces the size;
//   - a regular file's data (and an unknown type's) is skipped, rounded up to
//     512 bytes; other types have no data;
//   - when the data rounded up runs past the end of the file, listing the
//     next member raises ReadError (a TarError: torch.load then falls back to
//     reading the file as a pickle from its first byte).
// Anything that torch.save's tar writer never made (extended headers, links,
// numbers in unusual spellings) is an anomaly: the caller reports it, since
// another Python's tarfile may read such a file differently.
//
// Safety: headers are read one block at a time through ByteSource; extended
// header data is read only up to 64 KiB; at most `max_members` headers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tsarchive {

class ByteSource;

struct TarMember {
  std::string name;           // as tarfile names it
  char type = '0';            // the header's type flag ('\0' for an old regular file)
  uint64_t header_offset = 0;
  uint64_t data_offset = 0;
  uint64_t size = 0;
  std::string linkname;
  // tarfile's isreg(): a regular or contiguous file.
  bool regular() const { return type == '0' || type == '\0' || type == '7'; }
  // What extract() writes and extractfile() reads as a file: a regular file,
  // or a type tarfile does not know.
  bool read_as_file() const;
};

// tarfile's SUPPORTED_TYPES.
bool tar_type_supported(char type);
// What a type flag is, in words: "file", "hard link", "symbolic link",
// "directory", ... ("member of type 'Z'" for others).
std::string tar_type_name(char type);
inline bool TarMember::read_as_file() const { return regular() || !tar_type_supported(type); }

struct TarListing {
  std::vector<TarMember> members;
  std::vector<std::string> anomalies;  // each with its offset
  std::string read_error;              // why tarfile raises ReadError part-way; empty when it does not
};

// Whether Python's tarfile reads `block` (512 bytes) as a header: not all
// zeros, every numeric field readable, the checksum right.
bool is_tar_header(const unsigned char* block);

// The members, when the first block is a header; nullopt otherwise.
std::optional<TarListing> list_tar(const ByteSource& source, size_t max_members = 100000);

}  // namespace tsarchive
