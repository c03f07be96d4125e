#include "operations/opened_archive.h"

namespace tsarchive {

OpenedArchive::OpenedArchive(const std::string& path, FileAccess access, double lock_timeout,
                             const std::string& cannot, const NoteSink& notes, bool accept_pt2)
    : file_(path, access, lock_timeout) {
  for (const std::string& note : file_.notes()) notes(note);
  archive_ = open_torchscript_archive(file_.source(), cannot, accept_pt2);
}

}  // namespace tsarchive
