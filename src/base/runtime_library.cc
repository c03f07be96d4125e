#include "base/runtime_library.h"

#include <dlfcn.h>

#include "base/error.h"

namespace tsarchive {

RuntimeLibrary::RuntimeLibrary(const char* soname, const char* install_hint)
    : soname_(soname), install_hint_(install_hint), handle_(::dlopen(soname, RTLD_NOW | RTLD_LOCAL)) {
  if (handle_ == nullptr) {
    const char* why = ::dlerror();
    cannot_load(why != nullptr ? why : "dlopen failed");
  }
}

void* RuntimeLibrary::address_of(const char* symbol) const {
  void* address = ::dlsym(handle_, symbol);
  if (address == nullptr) cannot_load(std::string("it has no ") + symbol + "()");
  return address;
}

void RuntimeLibrary::cannot_load(const std::string& why) const {
  throw_io("cannot load this shared library: " + why, soname_, install_hint_);
}

}  // namespace tsarchive
