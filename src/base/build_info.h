// What this build of tsarchive is: its version and commit, the libtorch its
// torch layer was compiled against (and whether with CUDA) and the archive
// versions that libtorch reads, and where the torch layer is installed. The
// one unit that includes CMake's generated tsarchive_config.h and
// tsarchive_commit.h, so that a new version, libtorch or commit recompiles
// one file. Reading it loads nothing: `--version` prints it without libtorch.
#pragma once

namespace tsarchive {

struct BuildInfo {
  const char* version;        // tsarchive's, e.g. "0.1.0"
  const char* commit;         // "4f3c4e4abc12", "...-dirty", or "unknown" (not built from a git checkout)
  bool with_torch;            // built with the torch layer (TSARCHIVE_WITH_TORCH)
  const char* torch_version;  // e.g. "1.13.1"
  bool torch_cuda;            // that libtorch was built with CUDA
  // The archive format and bytecode versions that libtorch reads.
  int reads_format_min;
  int reads_format_max;
  int reads_bytecode_min;
  int reads_bytecode_max;
  // The c10::ScalarTypes it knows: codes 0 to reads_scalar_types - 1.
  int reads_scalar_types;
  const char* torch_library_name;  // "libtsarchive_torch.so"
  const char* install_libdir;      // "lib": where it goes under the install prefix
};

const BuildInfo& build_info();

}  // namespace tsarchive
