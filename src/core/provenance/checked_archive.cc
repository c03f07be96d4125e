#include "core/provenance/checked_archive.h"

#include "base/build_info.h"
#include "base/error.h"

namespace tsarchive {

CheckedArchive check_for_libtorch(const ArchiveFile& file, const TorchArchive& archive, const std::string& consequence) {
  VerifyOptions structure;
  structure.readable = built_libtorch_versions();
  structure.digests = false;
  return admit_verified(file, archive, verify_archive(archive, structure), consequence);
}

CheckedArchive admit_verified(const ArchiveFile& file, const TorchArchive& archive, const VerifyReport& report,
                              const std::string& consequence) {
  refuse_damage(report, file.path(), consequence);
  refuse_unreadable(report, file.path(), consequence);
  return CheckedArchive(file, archive, true, report.format_version);
}

void refuse_damage(const VerifyReport& report, const std::string& file, const std::string& consequence) {
  if (report.problems.empty()) return;
  throw_bad_input("the archive is damaged: " + report.problems.front(), file,
                  consequence + "; run 'tsarchive verify' for details");
}

void refuse_unreadable(const VerifyReport& report, const std::string& file, const std::string& consequence) {
  if (report.unreadable.empty()) return;
  throw_bad_input(report.unreadable.front(), file, consequence + "; " + newer_libtorch_hint());
}

CheckedArchive admit_unchecked(const ArchiveFile& file, const TorchArchive& archive) {
  return CheckedArchive(file, archive, false, std::nullopt);  // nothing read: not even the version
}

std::string newer_libtorch_hint() {
  return "use a tsarchive built against a libtorch at least as new as the PyTorch that wrote it (this one uses "
         "libtorch " + std::string(build_info().torch_version) +
         "; README: Choosing the libtorch); inspect, extra and verify work without libtorch";
}

}  // namespace tsarchive
