#include "cli/opened_archive.h"

#include <utility>

#include "cli/output.h"

namespace tsarchive::cli {

OpenedArchive::OpenedArchive(const std::string& path, FileAccess access, double lock_timeout,
                             const std::string& cannot, Context& ctx, bool accept_pt2)
    : path_(path), err_(&ctx.err), file_(path, access, lock_timeout) {
  for (const std::string& note : file_.notes()) print_note(ctx.err, note);
  archive_ = open_torchscript_archive(file_.source(), cannot, accept_pt2);
}

WorkerJob OpenedArchive::job(const WorkerOptions& options, std::string activity) const {
  note_worker_sandbox(*err_);
  return worker_job(options, path_, archive_->zip().source().size(), std::move(activity));
}

}  // namespace tsarchive::cli
