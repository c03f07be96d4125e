#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/build_info.h"
#include "base/error.h"
#include "contract/torch_backend.h"
#include "worker/worker.h"

namespace tsarchive {
namespace {

std::string executable_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

TorchBackend* open_backend() {
  const TorchLayerLocation where = locate_torch_layer();
  if (!where.path.empty()) {
    void* handle = ::dlopen(where.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      throw Error(ErrorKind::Torch, std::string("cannot load the libtorch layer: ") + ::dlerror(), where.path,
                  "check that libtorch is installed (Debian: apt-get install libtorch-dev)");
    }
    using Entry = TorchBackend* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(handle, "tsarchive_torch_backend_v7"));
    if (entry == nullptr) {
      throw Error(ErrorKind::Torch, "the libtorch layer has no tsarchive_torch_backend_v7 entry point", where.path,
                  "it is from another tsarchive version; rebuild or reinstall tsarchive");
    }
    return entry();  // the handle stays open for the life of the process
  }
  if (where.from_environment) {
    throw Error(ErrorKind::Torch, "the libtorch layer named by TSARCHIVE_TORCH_LIBRARY does not exist",
                where.tried.front(), "fix or unset TSARCHIVE_TORCH_LIBRARY");
  }
  // A binary copied on its own, or one built without libtorch: say where we looked.
  std::string tried;
  for (const std::string& path : where.tried) tried += (tried.empty() ? "" : ", ") + path;
  const std::string library = build_info().torch_library_name;
  throw Error(ErrorKind::Torch, "cannot find the libtorch layer " + library + " (looked for " + tried + ")", {},
              "install tsarchive with 'cmake --install' or copy " + library +
                  " next to the binary; if it was built without libtorch, rebuild with libtorch installed; or set "
                  "TSARCHIVE_TORCH_LIBRARY to its path");
}

}  // namespace

// Next to the binary (build tree), then the install layout.
TorchLayerLocation locate_torch_layer() {
  TorchLayerLocation where;
  if (const char* env = std::getenv("TSARCHIVE_TORCH_LIBRARY"); env != nullptr && *env != '\0') {
    where.from_environment = true;
    where.tried = {env};
  } else {
    const std::string dir = executable_dir();
    const BuildInfo& b = build_info();
    where.tried = {dir + "/" + b.torch_library_name,
                   dir + "/../" + b.install_libdir + "/tsarchive/" + b.torch_library_name};
  }
  for (const std::string& path : where.tried) {
    if (::access(path.c_str(), F_OK) == 0) {
      where.path = path;
      break;
    }
  }
  return where;
}

TorchBackend& load_torch_backend() {
  static TorchBackend* backend = open_backend();
  return *backend;
}

}  // namespace tsarchive
