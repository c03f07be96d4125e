#include "format/byte_source.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/error.h"

namespace tsarchive {

std::string ByteSource::read_string(uint64_t offset, size_t length) const {
  std::string out(length, '\0');
  if (length > 0) read_at(offset, out.data(), length);
  return out;
}

namespace {

[[noreturn]] void throw_range(const ByteSource& source, uint64_t offset, size_t length) {
  throw_bad_input("file ends before byte " + std::to_string(offset + length) + " (it has " +
                      std::to_string(source.size()) + " bytes)",
                  source.name(), "the file is truncated or its offsets are corrupt");
}

bool in_range(uint64_t size, uint64_t offset, size_t length) {
  uint64_t end = 0;
  return !add_overflows(offset, length, &end) && end <= size;
}

class FileSource final : public ByteSource {
 public:
  FileSource(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  ~FileSource() override { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  uint64_t size() const override { return size_; }
  const std::string& name() const override { return path_; }

  void read_at(uint64_t offset, void* out, size_t length) const override {
    if (!in_range(size_, offset, length)) throw_range(*this, offset, length);
    auto* dest = static_cast<char*>(out);
    while (length > 0) {
      ssize_t n = ::pread(fd_, dest, length, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw_io(std::string("cannot read: ") + std::strerror(errno), path_);
      if (n == 0) throw_range(*this, offset, length);  // shrank under us
      dest += n;
      offset += static_cast<uint64_t>(n);
      length -= static_cast<size_t>(n);
    }
  }

 private:
  int fd_;
  uint64_t size_;
  std::string path_;
};

class MemorySource final : public ByteSource {
 public:
  MemorySource(std::string bytes, std::string name) : bytes_(std::move(bytes)), name_(std::move(name)) {}

  uint64_t size() const override { return bytes_.size(); }
  const std::string& name() const override { return name_; }

  void read_at(uint64_t offset, void* out, size_t length) const override {
    if (!in_range(bytes_.size(), offset, length)) throw_range(*this, offset, length);
    if (length > 0) std::memcpy(out, bytes_.data() + offset, length);
  }

 private:
  std::string bytes_;
  std::string name_;
};

class BorrowedSource final : public ByteSource {
 public:
  explicit BorrowedSource(const ByteSource& source) : source_(source) {}

  uint64_t size() const override { return source_.size(); }
  const std::string& name() const override { return source_.name(); }
  void read_at(uint64_t offset, void* out, size_t length) const override { source_.read_at(offset, out, length); }

 private:
  const ByteSource& source_;
};

std::string temp_folder() {
  const char* env = std::getenv("TMPDIR");
  return env != nullptr && *env != '\0' ? env : "/tmp";
}

// An unlinked file in `dir`, open for reading and writing, the caller's
// alone (0600, no name). `what` names its use in the error.
int unnamed_temp_file(const std::string& dir, const std::string& what) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {  // a filesystem without O_TMPFILE
    std::string name = dir + "/.tsarchive-copy-XXXXXX";
    fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd >= 0) ::unlink(name.c_str());
  }
  if (fd < 0) {
    throw_io("cannot make a temporary file for " + what + ": " + std::strerror(errno), dir,
             "set TMPDIR to a folder you can write to");
  }
  return fd;
}

// An unlinked temporary file in $TMPDIR (default /tmp) holding what
// standard input gives, up to kStdinLimit bytes.
int spool_stdin() {
  const std::string dir = temp_folder();
  int fd = unnamed_temp_file(dir, "standard input");
  std::string buf(1 << 20, '\0');
  uint64_t total = 0;
  while (true) {
    const ssize_t n = ::read(STDIN_FILENO, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw_io(std::string("cannot read standard input: ") + std::strerror(err), "-");
    }
    if (n == 0) break;
    total += static_cast<uint64_t>(n);
    if (total > kStdinLimit) {
      ::close(fd);
      throw_bad_input("standard input gives more than " + std::to_string(kStdinLimit >> 30) + " GiB", "-",
                      "give the archive as a file");
    }
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(fd, buf.data() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        const int err = errno;
        ::close(fd);
        throw_io(std::string("cannot copy standard input to a temporary file: ") + std::strerror(err), dir,
                 "free space there, or set TMPDIR to a folder with room");
      }
      done += w;
    }
  }
  return fd;
}

}  // namespace

int open_stdin_file(struct stat* st) {
  static std::mutex mutex;
  static int file = -1;  // stays open until the process ends: every "-" reads it
  const std::lock_guard<std::mutex> lock(mutex);
  if (file < 0) {
    if (::isatty(STDIN_FILENO) == 1) {
      throw_usage("standard input ('-') is a terminal, not an archive", "pipe one in, e.g. cat model.pt | tsarchive inspect -");
    }
    struct stat in {};
    if (::fstat(STDIN_FILENO, &in) != 0) throw_io(std::string("cannot read standard input: ") + std::strerror(errno), "-");
    const bool whole_file = S_ISREG(in.st_mode) && ::lseek(STDIN_FILENO, 0, SEEK_CUR) == 0;
    file = whole_file ? ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0) : spool_stdin();
    if (file < 0) throw_io(std::string("cannot read standard input: ") + std::strerror(errno), "-");
  }
  const int fd = ::fcntl(file, F_DUPFD_CLOEXEC, 0);
  if (fd < 0 || ::fstat(fd, st) != 0) throw_io(std::string("cannot read standard input: ") + std::strerror(errno), "-");
  return fd;
}

int private_copy(int fd, uint64_t size, const std::string& path) {
  const std::string dir = temp_folder();
  // Whoever can hold the file open (and so make tsarchive copy it) may also
  // have made it sparse, a terabyte of holes: the copy takes at most half of
  // what is free there, and the user is told where to make room.
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) == 0) {
    const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (size > free_bytes / 2) {
      throw_io("no room for a private copy of the model: it takes " + std::to_string(size) + " bytes, and " +
                   std::to_string(free_bytes) + " are free in " + dir + " (a copy takes at most half)",
               path, "set TMPDIR to a folder with room, or stop what holds the file open for writing");
    }
  }
  const int copy = unnamed_temp_file(dir, "a private copy of the model");
  const auto fail = [&](const std::string& what, const std::string& where, const char* hint) {
    const int err = errno;
    ::close(copy);
    throw_io(what + ": " + std::strerror(err), where, hint);
  };
  loff_t from = 0;
  while (static_cast<uint64_t>(from) < size) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(size - static_cast<uint64_t>(from), 1u << 30));
    ssize_t n = ::copy_file_range(fd, &from, copy, nullptr, chunk, 0);
    if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
      n = ::sendfile(copy, fd, &from, chunk);  // kernels and file systems without copy_file_range between them
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const bool space = errno == ENOSPC || errno == EDQUOT || errno == EFBIG;
      fail(space ? "no room for a private copy of the model" : "cannot copy the model", space ? dir : path,
           space ? "free space there, or set TMPDIR to a folder with room" : "check the file and run it again");
    }
    if (n == 0) {
      ::close(copy);
      throw_io("the file became shorter while it was copied", path, "run it again when nothing writes the file");
    }
  }
  // From here on nobody has it open for writing: not even this process.
  const int read_only = ::open(("/proc/self/fd/" + std::to_string(copy)).c_str(), O_RDONLY | O_CLOEXEC);
  if (read_only < 0) fail("cannot reopen the private copy of the model", dir, "check that /proc is mounted");
  ::close(copy);
  return read_only;
}

int open_regular_file(const std::string& path, int flags, struct stat* st) {
  if (is_standard_stream(path)) {
    if ((flags & O_ACCMODE) != O_RDONLY) {
      throw_usage("standard input ('-') cannot be changed in place", "give the archive as a file");
    }
    return open_stdin_file(st);
  }
  // O_NONBLOCK: opening a FIFO without a writer (or a device) returns at
  // once, to be refused below, instead of waiting for ever.
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) throw_io("no such file", path, "check the path");
    if (err == EACCES) throw_io("permission denied", path, "check the file's permissions");
    if (err == EISDIR) throw_io("is a directory, not a model file", path, "give the path of a .pt or .ptl file");
    if (err == EROFS) throw_io("the file is on a read-only filesystem", path, "write the result elsewhere with -o");
    throw_io(std::string("cannot open: ") + std::strerror(err), path);
  }
  if (::fstat(fd, st) != 0) {
    const int err = errno;
    ::close(fd);
    throw_io(std::string("cannot stat: ") + std::strerror(err), path);
  }
  if (S_ISDIR(st->st_mode)) {
    ::close(fd);
    throw_io("is a directory, not a model file", path, "give the path of a .pt or .ptl file");
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(fd);
    throw_io(S_ISFIFO(st->st_mode) ? "a pipe, not a regular file" : "not a regular file", path,
             "give the path of a model file, or '-' to read it from standard input");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

std::unique_ptr<ByteSource> open_file_source(const std::string& path) {
  struct stat st {};
  const int fd = open_regular_file(path, O_RDONLY, &st);
  return std::make_unique<FileSource>(fd, static_cast<uint64_t>(st.st_size), path);
}

std::unique_ptr<ByteSource> make_fd_source(int fd, uint64_t size, std::string name) {
  return std::make_unique<FileSource>(fd, size, std::move(name));
}

std::unique_ptr<ByteSource> borrow_source(const ByteSource& source) {
  return std::make_unique<BorrowedSource>(source);
}

std::unique_ptr<ByteSource> make_memory_source(std::string bytes, std::string name) {
  return std::make_unique<MemorySource>(std::move(bytes), std::move(name));
}

std::string ByteReader::described() const {
  std::string out(what_);
  if (!subject_.empty()) out.append(" of '").append(subject_).append("'");
  return out;
}

void ByteReader::ends_early(uint64_t n) const {
  throw_bad_input(described() + " ends early: needs " + std::to_string(n) + " more bytes at offset " +
                  std::to_string(pos_) + ", has " + std::to_string(remaining()));
}

std::string_view ByteReader::line() {
  size_t nl = bytes_.find('\n', pos_);
  if (nl == std::string_view::npos) {
    throw_bad_input(described() + " ends early: a text line at offset " + std::to_string(pos_) + " has no end");
  }
  std::string_view out = bytes_.substr(pos_, nl - pos_);
  pos_ = nl + 1;
  return out;
}

bool add_overflows(uint64_t a, uint64_t b, uint64_t* sum) { return __builtin_add_overflow(a, b, sum); }
bool mul_overflows(uint64_t a, uint64_t b, uint64_t* product) { return __builtin_mul_overflow(a, b, product); }

}  // namespace tsarchive
