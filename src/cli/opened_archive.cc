#include "cli/opened_archive.h"

#include "cli/output.h"

namespace tsarchive::cli {

OpenedArchive::OpenedArchive(const std::string& path, FileAccess access, double lock_timeout,
                             const std::string& cannot, Context& ctx, bool accept_pt2)
    : file_(path, access, lock_timeout) {
  for (const std::string& note : file_.notes()) print_note(ctx.err, note);
  archive_ = open_torchscript_archive(file_.source(), cannot, accept_pt2);
}

}  // namespace tsarchive::cli
