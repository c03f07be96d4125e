// Shared libraries the binary loads when it first needs them (dlopen()), not
// at start-up: libzip (format/libzip.h) and libcrypto (core/provenance/digest.cc).
// Loading and relocating them cost every start-up 1.1 ms, `tsarchive
// --version` included, where a whole `unzip -l` takes 1.2 ms.
//
// Callers keep their functions' declarations from the library's own headers
// (decltype(&::function)), so a library whose functions changed shape still
// fails the build.
#pragma once

#include <string>

namespace tsarchive {

// A library opened with RTLD_NOW | RTLD_LOCAL (its symbols stay out of the
// scope that libtorch and --load-library libraries resolve against) and kept
// open for the life of the process.
class RuntimeLibrary {
 public:
  // Throws Error(Io) naming `soname`, with `install_hint`, when it cannot be loaded.
  RuntimeLibrary(const char* soname, const char* install_hint);

  // Sets `out` to the library's `symbol`; throws Error(Io) when it has none.
  template <typename Function>
  void bind(const char* symbol, Function& out) const {
    out = reinterpret_cast<Function>(address_of(symbol));
  }

 private:
  void* address_of(const char* symbol) const;
  [[noreturn]] void cannot_load(const std::string& why) const;

  const char* soname_;
  const char* install_hint_;
  void* handle_ = nullptr;
};

}  // namespace tsarchive
