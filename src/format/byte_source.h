// Where archive bytes come from. Everything that parses untrusted input reads
// through a ByteSource (a file, or memory for tests and fuzzers), and through
// ByteReader, which checks every length against what is really there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct stat;

namespace tsarchive {

class ByteSource {
 public:
  virtual ~ByteSource() = default;

  virtual uint64_t size() const = 0;
  // A display name for messages (the path, or "<memory>").
  virtual const std::string& name() const = 0;
  // Copies exactly `length` bytes starting at `offset` into `out`.
  // Throws Error(BadInput) if the range is not inside the source, Error(Io) on read failure.
  virtual void read_at(uint64_t offset, void* out, size_t length) const = 0;

  // Convenience: the bytes [offset, offset+length) as a string.
  std::string read_string(uint64_t offset, size_t length) const;
};

// Opens a regular file for reading. Throws Error(Io) for missing files,
// permissions and directories, naming the path.
std::unique_ptr<ByteSource> open_file_source(const std::string& path);

// Opens `path` with open(2) `flags` and checks it is a regular file; fills
// `st`. Throws Error(Io) with a message for people. Returns the descriptor.
// "-" is standard input (open_stdin_file), for reading only.
int open_regular_file(const std::string& path, int flags, struct stat* st);

// "-" names standard input wherever a file is read, and standard output
// where the CLI writes one (-o -); a file named "-" is ./-.
inline bool is_standard_stream(const std::string& path) { return path == "-"; }

// Standard input past this size is refused (Error(BadInput)): an endless
// stream must not fill the disk.
inline constexpr uint64_t kStdinLimit = 64ull << 30;

// Standard input as a regular file, made once per process: stdin itself when
// it is a regular file read from its start (`< model.pt`), else its bytes
// copied into an unlinked temporary file in $TMPDIR (default /tmp), at most
// kStdinLimit bytes; a terminal is refused (Error(Usage)). Returns a new
// descriptor (close-on-exec) the caller owns, and fills `st`.
int open_stdin_file(struct stat* st);

// The first `size` bytes of `fd` copied into an unlinked temporary file in
// $TMPDIR (default /tmp) that no process holds open for writing: a read-only
// descriptor (close-on-exec) the caller owns. `path` names the original in
// errors. Throws Error(Io) when it would take more than half of what is
// free there (a sparse file of holes), when there is no room, or when the
// file got shorter.
int private_copy(int fd, uint64_t size, const std::string& path);

// Reads from a descriptor it takes ownership of; `size` is fixed at creation.
std::unique_ptr<ByteSource> make_fd_source(int fd, uint64_t size, std::string name);

// A source that reads through `source`, which must outlive it: for code that
// is given a ByteSource& and needs to hand an owner to ZipArchive.
std::unique_ptr<ByteSource> borrow_source(const ByteSource& source);

// Wraps bytes held in memory (tests, fuzzers, archives built on the fly).
std::unique_ptr<ByteSource> make_memory_source(std::string bytes, std::string name = "<memory>");

// Sequential little-endian reader over a buffer it does not own. Every read is
// bounds-checked; overruns throw Error(BadInput) naming what was read and the
// offset: `what` ("central directory"), or "<what> of '<subject>'" when a
// subject is given. Both are views the caller keeps alive while reading; the
// message is built only when a read fails, so a reader per ZIP record or
// pickle costs no allocation.
class ByteReader {
 public:
  ByteReader(std::string_view bytes, std::string_view what, std::string_view subject = {})
      : bytes_(bytes), what_(what), subject_(subject) {}

  size_t offset() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }
  bool at_end() const { return pos_ == bytes_.size(); }

  uint8_t u8() { return static_cast<uint8_t>(little_endian(1)); }
  uint16_t u16() { return static_cast<uint16_t>(little_endian(2)); }
  uint32_t u32() { return static_cast<uint32_t>(little_endian(4)); }
  uint64_t u64() { return little_endian(8); }
  std::string_view bytes(uint64_t n) {
    need(n);
    const std::string_view out = bytes_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return out;
  }
  void skip(uint64_t n) { bytes(n); }
  // Reads up to and including '\n'; returns the line without it.
  std::string_view line();

 private:
  void need(uint64_t n) const {
    if (n > remaining()) ends_early(n);
  }
  uint64_t little_endian(size_t n) {
    need(n);
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<uint8_t>(bytes_[pos_ + i]);
    pos_ += n;
    return v;
  }
  [[noreturn]] void ends_early(uint64_t n) const;
  std::string described() const;

  std::string_view bytes_;
  size_t pos_ = 0;
  std::string_view what_;
  std::string_view subject_;
};

// Checked arithmetic on sizes that come from the input.
bool add_overflows(uint64_t a, uint64_t b, uint64_t* sum);
bool mul_overflows(uint64_t a, uint64_t b, uint64_t* product);

}  // namespace tsarchive
