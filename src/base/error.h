// One error type for the whole program. It carries a kind that maps to the
// process exit code, the file it concerns, and what the user can do about it;
// the CLI catches it once and prints
//   tsarchive: error: <what> (<file>): <hint>
#pragma once

#include <stdexcept>
#include <string>

namespace tsarchive {

// Values are the exit codes of man/tsarchive.1.md's one table, EXIT STATUS (test manual.exit_codes).
enum class ErrorKind {
  CheckFailed = 1,  // a check ran and failed (verify mismatch, NaN found)
  Usage = 2,        // bad command line
  BadInput = 3,     // not a valid or supported archive / input file
  Io = 4,           // the operating system refused (permissions, disk full)
  Torch = 5,        // libtorch failed or is unavailable
  Internal = 6,     // a bug in tsarchive, or this process ran out of memory
  // A model signature that does not verify, or whose signer is not the key or
  // certificate roots given (verify --key / --certificate-chain).
  SignatureInvalid = 7,
  UnsafeToLoad = 8,  // loading the file would run something beyond the allowlist, or it is crafted
};

// `text` with each NUL byte spelled \x00, as escape_text (terminal_text.h)
// spells the other C0 controls: what() is a C string, so a NUL from a file (a
// .npy descr, a record name) would end the message there, and the rest of the
// sentence, the part that says what is wrong, would be lost.
inline std::string without_nul_bytes(std::string text) {
  for (size_t at = text.find('\0'); at != std::string::npos; at = text.find('\0', at + 4)) {
    text.replace(at, 1, "\\x00");
  }
  return text;
}

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string what, std::string file = {}, std::string hint = {})
      : std::runtime_error(without_nul_bytes(std::move(what))),
        kind_(kind),
        file_(std::move(file)),
        hint_(std::move(hint)) {}

  ErrorKind kind() const noexcept { return kind_; }
  const std::string& file() const noexcept { return file_; }
  const std::string& hint() const noexcept { return hint_; }
  // Raw text behind the one-line message (libtorch's full error), shown with --verbose.
  const std::string& detail() const noexcept { return detail_; }
  int exit_code() const noexcept { return static_cast<int>(kind_); }

  // Returns a copy naming `file`, for errors raised below the layer that knows it.
  Error with_file(std::string file) const {
    Error e(kind_, what(), std::move(file), hint_);
    e.detail_ = detail_;
    return e;
  }
  Error with_detail(std::string detail) const {
    Error e = *this;
    e.detail_ = std::move(detail);
    return e;
  }

 private:
  ErrorKind kind_;
  std::string file_;
  std::string hint_;
  std::string detail_;
};

// Shorthands for the common kinds, so call sites read as sentences.
[[noreturn]] inline void throw_bad_input(std::string what, std::string file = {}, std::string hint = {}) {
  throw Error(ErrorKind::BadInput, std::move(what), std::move(file), std::move(hint));
}
[[noreturn]] inline void throw_io(std::string what, std::string file = {}, std::string hint = {}) {
  throw Error(ErrorKind::Io, std::move(what), std::move(file), std::move(hint));
}
[[noreturn]] inline void throw_signature_invalid(std::string what, std::string file = {}, std::string hint = {}) {
  throw Error(ErrorKind::SignatureInvalid, std::move(what), std::move(file), std::move(hint));
}
[[noreturn]] inline void throw_usage(std::string what, std::string hint = {}) {
  throw Error(ErrorKind::Usage, std::move(what), {}, std::move(hint));
}

}  // namespace tsarchive
