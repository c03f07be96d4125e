#include "cli/gate.h"

#include <ostream>

#include "cli/output.h"
#include "cli/report_verify.h"
#include "base/error.h"

namespace tsarchive::cli {

VerifyReport require_intact(const TorchArchive& archive, const std::string& file, const std::string& consequence) {
  VerifyReport report = verify_archive(archive, VerifyOptions{0, built_libtorch_versions()});
  if (!report.problems.empty()) {
    throw_bad_input("the archive is damaged: " + report.problems.front(), file,
                    consequence + "; run 'tsarchive verify' for details");
  }
  if (!report.unreadable.empty()) throw_bad_input(report.unreadable.front(), file, consequence + "; " + newer_libtorch_hint());
  return report;
}

void check_before_libtorch(const TorchArchive& archive, const std::string& file, const std::string& consequence,
                           bool skip, std::ostream& err) {
  if (!skip) {
    require_intact(archive, file, consequence);
    return;
  }
  print_note(err, "--no-validate: libtorch reads " + file +
                      " unchecked (in its worker, within --memory-limit and --time-limit)");
}

}  // namespace tsarchive::cli
