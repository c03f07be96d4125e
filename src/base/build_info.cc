#include "base/build_info.h"

#include "tsarchive_commit.h"
#include "tsarchive_config.h"

namespace tsarchive {

const BuildInfo& build_info() {
  static const BuildInfo info{TSARCHIVE_VERSION,
                              TSARCHIVE_BUILD_COMMIT,
                              TSARCHIVE_WITH_TORCH != 0,
                              TSARCHIVE_TORCH_VERSION,
                              TSARCHIVE_TORCH_CUDA != 0,
                              TSARCHIVE_READS_FORMAT_MIN,
                              TSARCHIVE_READS_FORMAT_MAX,
                              TSARCHIVE_READS_BYTECODE_MIN,
                              TSARCHIVE_READS_BYTECODE_MAX,
                              TSARCHIVE_READS_SCALAR_TYPES,
                              TSARCHIVE_TORCH_LIBRARY_NAME,
                              TSARCHIVE_INSTALL_LIBDIR};
  return info;
}

}  // namespace tsarchive
