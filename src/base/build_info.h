// What this build of tsarchive is: its version, the libtorch its torch layer
// was compiled against and the archive versions that libtorch reads, and
// where the torch layer is installed. The one unit that includes CMake's
// generated tsarchive_config.h, so that a new version or libtorch recompiles
// one file.
#pragma once

namespace tsarchive {

struct BuildInfo {
  const char* version;        // tsarchive's, e.g. "0.1.0"
  const char* torch_version;  // e.g. "1.13.1"
  // The archive format and bytecode versions that libtorch reads.
  int reads_format_min;
  int reads_format_max;
  int reads_bytecode_min;
  int reads_bytecode_max;
  const char* torch_library_name;  // "libtsarchive_torch.so"
  const char* install_libdir;      // "lib": where it goes under the install prefix
};

const BuildInfo& build_info();

}  // namespace tsarchive
