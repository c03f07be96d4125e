#include "operations/staged_save.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "core/provenance/checked_archive.h"
#include "format/archive.h"
#include "base/error.h"
#include "core/edit/extra.h"
#include "core/provenance/signing_embedded.h"

namespace tsarchive {

std::vector<std::pair<std::string, std::string>> digests_without_stamp(const std::vector<RecordDigest>& records,
                                                                       const std::string& file,
                                                                       const std::string& stamp_record) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const RecordDigest& d : records) {
    if (!d.problem.empty()) throw_bad_input("record '" + d.name + "': " + d.problem, file, "nothing was written");
    // An embedded signature covers the stamp, so the stamp leaves it out.
    if (d.name != stamp_record && d.name != kEmbeddedSignatureRecord) out.emplace_back(d.name, d.sha256);
  }
  return out;
}

StagedStamp write_staged_with_stamp(ArchiveFile& file, const std::string& staged, StampContent content,
                                    const std::string& output, const std::string& expected_top, const std::string& display,
                                    const StagedExtras& extras) {
  struct stat st {};
  const int fd = open_regular_file(staged, O_RDONLY | O_CLOEXEC, &st);
  const int source_fd = ::dup(fd);
  try {
    const TorchArchive copy(make_fd_source(fd, static_cast<uint64_t>(st.st_size), staged));
    if (copy.top_folder() != expected_top) {
      throw Error(ErrorKind::Torch, "libtorch named the top folder '" + copy.top_folder() + "', not '" + expected_top + "'",
                  display, "nothing was written");
    }
    // Hashed in full: the stamp's digests are the copy's.
    const VerifyReport gate = verify_archive(copy, VerifyOptions{0, built_libtorch_versions()});
    const std::string consequence = "nothing was written (the archive libtorch wrote is damaged)";
    refuse_damage(gate, display, consequence);
    refuse_unreadable(gate, display, consequence);
    if (content.archive_name.empty()) content.archive_name = copy.top_folder();
    if (!content.format_version) content.format_version = gate.format_version;
    // verify digested every record; the carried extra files replace or join them.
    const std::string stamp_record = extra_record_name(extras.stamp_name);
    std::map<std::string, std::string> digests;
    for (const auto& [name, hex] : digests_without_stamp(gate.records, display, stamp_record)) digests[name] = hex;
    for (const ExtraEdit& e : extras.carried) {
      if (e.value) digests[extra_record_name(e.name)] = sha256_hex(*e.value);
    }
    digests.erase(stamp_record);
    digests.erase(kEmbeddedSignatureRecord);
    content.digests.emplace(digests.begin(), digests.end());
    StagedStamp written{{}, render_stamp(content), gate.format_version, {}};
    std::vector<ExtraEdit> edits = extras.carried;
    edits.push_back(ExtraEdit{extras.stamp_name, written.stamp});
    if (extras.sign != nullptr) {
      EmbeddedSignature signature = sign_archive_records(gate.records, edits, copy.top_folder(), *extras.sign, display);
      written.signer = signature.signed_records.signer;
      edits.push_back(std::move(signature.edit));
    }
    const ExtraEditPlan plan = plan_extra_edits(copy, edits, false);
    written.result = output.empty() ? file.replace(plan.zip, source_fd) : file.write_new(plan.zip, output, source_fd);
    ::close(source_fd);
    return written;
  } catch (...) {
    ::close(source_fd);
    throw;
  }
}

}  // namespace tsarchive
