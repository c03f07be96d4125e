// The second half of a libtorch save (operations/staged_save.h): the copy
// libtorch wrote with the export hook's stamp, given its final stamp and put
// in the archive's place. The copies here are made as libtorch makes them (the
// hook's stamp is an extra file written the way PyTorchStreamWriter writes
// one), without libtorch; tests/pytorch/test_stamp_verify.sh does it for real.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>

#include "base/temp_files_and_locks.h"
#include "core/edit/extra.h"
#include "core/edit/file_edit.h"
#include "core/provenance/digest.h"
#include "core/provenance/producer_info.h"
#include "core/provenance/verify.h"
#include "format/zip_writer.h"
#include "archive_bytes.h"
#include "helpers.h"
#include "operations/staged_save.h"
#include "worker/sandbox.h"

using namespace tsarchive;

namespace {

StampContent hook_content(const TorchArchive& archive) {
  StampContent content;
  content.context.created_at = "1970-01-01T00:00:00Z";
  content.producer_version = "9.9";
  content.method = "export-hook";
  content.libtorch_version = "1.13.1";
  content.archive_name = archive.top_folder();
  return content;
}

ino_t inode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_ino;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// The stamp in `path` checks against every record, and nothing else changed.
void require_stamped(const std::string& path, const std::string& original) {
  const std::string written = slurp(path);
  const auto archive = open_bytes(written);
  const VerifyReport report = verify_archive(*archive, VerifyOptions{});
  CHECK(report.outcome() == VerifyOutcome::Intact);
  REQUIRE(report.stamp);
  CHECK(report.stamp->problem.empty());
  CHECK(report.stamp->root_matches);
  CHECK(report.stamp->changed.empty());
  CHECK(report.stamp->missing.empty());
  CHECK(report.stamp->added.empty());
  const auto before = open_bytes(original);
  for (const Record& r : before->records()) {
    if (r.kind == RecordKind::Extra) continue;
    const Record* now = archive->find(r.name);
    REQUIRE(now != nullptr);
    CHECK(archive->read(*now, 1 << 20) == before->read(r, 1 << 20));
  }
}

bool copies_may_be_renamed() {
  const SandboxSupport& s = sandbox_support();
  return !s.disabled && s.seccomp;
}

}  // namespace

TEST_CASE("a plan that keeps offsets is written over its source: only the bytes it makes") {
  const std::string original = slurp(testdata("mlp_scripted.pt"));
  const std::string padded = with_stamp(original, pad_stamp("{}", 4096));
  const auto archive = open_bytes(padded);
  const std::string same_size = pad_stamp("{\"a\":1}", 4096);
  const ExtraEditPlan plan = plan_extra_edits(*archive, {ExtraEdit{kStampName, same_size}}, false);
  CHECK(plan_keeps_offsets(plan.zip, padded.size()));
  // Longer or shorter: everything after the stamp moves.
  CHECK_FALSE(plan_keeps_offsets(plan_extra_edits(*archive, {ExtraEdit{kStampName, "{}"}}, false).zip, padded.size()));
  CHECK_FALSE(plan_keeps_offsets(plan_extra_edits(*archive, {ExtraEdit{"more.txt", "x"}}, false).zip, padded.size()));

  TempDir dir;
  const std::string path = dir.file("m.pt");
  write_file(path, padded);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const uint64_t written = write_plan_over_source(plan.zip, fd, path);
  ::close(fd);
  const ByteSource& source = archive->zip().source();
  const std::string expected =
      render_plan(plan.zip, 0, [&](uint64_t offset, char* out, size_t n) { source.read_at(offset, out, n); });
  CHECK(slurp(path) == expected);
  CHECK(written < 8192);  // the stamp's entry and the central directory
  CHECK(open_bytes(slurp(path))->read(*open_bytes(slurp(path))->find("extra/producer_info.json"), 1 << 20) == same_size);
}

TEST_CASE("the hook's stamp reserves room for the digests of a copy of its archive") {
  for (const char* name : {"mlp_scripted.pt", "convnet_traced.pt", "dtypes.pt"}) {
    const std::string original = slurp(testdata(name));
    const auto archive = open_bytes(original);
    StampContent content = hook_content(*archive);
    const std::string hook = render_stamp(content);
    const size_t room = stamp_size_with_digests(hook, *archive);
    std::vector<std::pair<std::string, std::string>> digests;
    for (const Record& r : archive->records()) digests.emplace_back(r.name, std::string(64, 'f'));
    content.digests = digests;
    content.format_version = 10;
    INFO(name);
    CHECK(render_stamp(content).size() <= room);
    CHECK(room < render_stamp(content).size() * 2);
    const std::string padded = pad_stamp(hook, room);
    CHECK(padded.size() == room);
    CHECK(padded.back() == '\n');
    CHECK(parse_stamp(padded, name).created_at == "1970-01-01T00:00:00Z");  // JSON with whitespace after it
  }
  CHECK(pad_stamp("{\"a\":1}", 3) == "{\"a\":1}");
}

TEST_CASE("staged save: a final stamp that fits the hook's room is written over the copy, which takes the file's place") {
  TempDir dir;
  const std::string model = dir.copy("mlp_scripted.pt");
  const std::string original = slurp(model);
  const auto source = open_bytes(original);
  const std::string top = source->top_folder();
  StampContent content = hook_content(*source);
  const std::string hook = render_stamp(content);
  // What libtorch's save leaves in `stage`: the copy, with the hook's stamp
  // padded to the room the digests take.
  const std::string padded_copy = with_stamp(original, pad_stamp(hook, stamp_size_with_digests(hook, *source)));
  const auto stage_copy = [&](const StagingFolder& stage, const std::string& bytes) {
    const std::string staged = stage.path() + "/" + top + ".pt";
    write_file(staged, bytes);
    return staged;
  };

  SECTION("replacing the archive") {
    ArchiveFile file(model, FileAccess::Edit, 10);
    const StagingFolder stage(model, original.size());
    const std::string staged = stage_copy(stage, padded_copy);
    const ino_t copy = inode_of(staged);
    const StagedStamp out = write_staged_with_stamp(file, staged, content, "", top, model);
    require_stamped(model, original);
    if (copies_may_be_renamed()) {
      CHECK(inode_of(model) == copy);  // renamed, not copied
      CHECK(out.result.bytes_written < 64 * 1024);
    } else {
      WARN("no seccomp sandbox here: the copy is copied");
    }
    CHECK(out.result.size == slurp(model).size());
  }
  SECTION("to another file (-o)") {
    ArchiveFile file(model, FileAccess::Read, 10);
    const std::string output = dir.file("out.pt");
    const StagingFolder stage(output, original.size());
    const std::string staged = stage_copy(stage, padded_copy);
    const ino_t copy = inode_of(staged);
    write_staged_with_stamp(file, staged, content, output, top, model);
    require_stamped(output, original);
    CHECK(slurp(model) == original);
    if (copies_may_be_renamed()) CHECK(inode_of(output) == copy);
  }
  SECTION("a hook's stamp without room: the copy is copied with the stamp") {
    ArchiveFile file(model, FileAccess::Edit, 10);
    const StagingFolder stage(model, original.size());
    const std::string staged = stage_copy(stage, with_stamp(original, hook));
    const ino_t copy = inode_of(staged);
    const StagedStamp out = write_staged_with_stamp(file, staged, content, "", top, model);
    require_stamped(model, original);
    CHECK(inode_of(model) != copy);
    CHECK(out.result.bytes_written == out.result.size);
    CHECK(out.stamp.back() == '}');  // not padded: nothing to fill
  }
  SECTION("a copy with a second name is copied, not renamed") {
    ArchiveFile file(model, FileAccess::Edit, 10);
    const StagingFolder stage(model, original.size());
    const std::string staged = stage_copy(stage, padded_copy);
    REQUIRE(::link(staged.c_str(), (stage.path() + "/other").c_str()) == 0);
    const ino_t copy = inode_of(staged);
    write_staged_with_stamp(file, staged, content, "", top, model);
    require_stamped(model, original);
    CHECK(inode_of(model) != copy);
  }
  SECTION("a link the worker left at the copy's name is refused; the file it names is not touched") {
    ArchiveFile file(model, FileAccess::Edit, 10);
    const StagingFolder stage(model, original.size());
    const std::string elsewhere = dir.file("users-other-model.pt");
    const std::string planted = padded_copy;
    write_file(elsewhere, planted);
    const std::string staged = stage.path() + "/" + top + ".pt";
    REQUIRE(::symlink(elsewhere.c_str(), staged.c_str()) == 0);
    CHECK_THROWS_AS(write_staged_with_stamp(file, staged, content, "", top, model), Error);
    CHECK(slurp(elsewhere) == planted);
    CHECK(slurp(model) == original);
  }
  SECTION("a copy that lacks, changed or added an extra file is refused, naming it") {
    ArchiveFile file(model, FileAccess::Edit, 10);
    const StagingFolder stage(model, original.size());
    const std::string staged = stage_copy(stage, padded_copy);
    using Kept = std::vector<std::pair<std::string, std::string>>;
    Kept originals;
    for (const char* name : {"extra/labels.json", "extra/model_card.md", "extra/config/train.yaml"}) {
      originals.emplace_back(name, sha256_hex(source->read(*source->find(name), 1 << 20)));
    }
    StagedExtras extras;
    extras.kept = Kept{{"extra/notes.txt", sha256_hex("a note the save carried")}};
    const Error lost = error_of([&] { write_staged_with_stamp(file, staged, content, "", top, model, extras); });
    CHECK(lost.kind() == ErrorKind::Torch);
    CHECK_THAT(lost.what(), Catch::Contains("lacks extra/notes.txt of the original"));
    CHECK_THAT(lost.hint(), Catch::Contains("nothing was written"));
    CHECK(slurp(model) == original);
    extras.kept = Kept{{"extra/labels.json", sha256_hex("what the original held")}};
    CHECK_THAT(error_of([&] { write_staged_with_stamp(file, staged, content, "", top, model, extras); }).what(),
               Catch::Contains("changed extra/labels.json"));
    CHECK(slurp(model) == original);
    // The copy holds one the original did not: added unasked (a forged signature, a run check).
    extras.kept = Kept(originals.begin(), originals.begin() + 2);
    CHECK_THAT(error_of([&] { write_staged_with_stamp(file, staged, content, "", top, model, extras); }).what(),
               Catch::Contains("holds extra/config/train.yaml, which the original does not"));
    CHECK(slurp(model) == original);
    extras.kept = originals;
    write_staged_with_stamp(file, staged, content, "", top, model, extras);
    require_stamped(model, original);
  }
  SECTION("a copy must hold the original's tensors, path by path, value for value") {
    ArchiveFile file(model, FileAccess::Edit, 10);
    const StagingFolder stage(model, original.size());
    // Two storages of the same size trade bytes: every record's SHA-256 is
    // still one the original has, but two parameters changed values.
    const ZipLayout& layout = source->zip().layout();
    std::vector<const ZipEntry*> same_size;
    for (const ZipEntry& e : layout.entries) {
      if (e.name.find("/data/") != std::string::npos && e.uncompressed_size == 64) same_size.push_back(&e);
    }
    REQUIRE(same_size.size() >= 2);
    const auto bytes_of = [&](const ZipEntry& e) { return source->zip().read(e, 1 << 20); };
    REQUIRE(bytes_of(*same_size[0]) != bytes_of(*same_size[1]));
    std::vector<ZipEntrySpec> entries;
    for (const ZipEntry& e : layout.entries) {
      if (&e == same_size[0]) entries.push_back(ZipEntrySpec::create(e.name, bytes_of(*same_size[1])));
      else if (&e == same_size[1]) entries.push_back(ZipEntrySpec::create(e.name, bytes_of(*same_size[0])));
      else entries.push_back(ZipEntrySpec::keep(e));
    }
    const ZipRewritePlan plan = plan_zip_rewrite(source->zip().source(), layout, entries);
    const std::string swapped = render_plan(plan, 0, [&](uint64_t offset, char* out, size_t n) {
      source->zip().source().read_at(offset, out, n);
    });
    const std::string staged = stage_copy(stage, with_stamp(swapped, pad_stamp(hook, stamp_size_with_digests(hook, *source))));
    StagedExtras extras;
    extras.tensors_of = source.get();
    const Error changed = error_of([&] { write_staged_with_stamp(file, staged, content, "", top, model, extras); });
    CHECK(changed.kind() == ErrorKind::Torch);
    CHECK_THAT(changed.what(), Catch::Matches("the archive libtorch re-saved changed [0-9]+ values of tensor .*"));
    CHECK_THAT(changed.hint(), Catch::Contains("--keep-bytes"));
    CHECK(slurp(model) == original);
    // Another model's tensors: paths the original does not have.
    const auto other = open_bytes(slurp(testdata("convnet_traced.pt")));
    extras.tensors_of = other.get();
    CHECK_THAT(error_of([&] { write_staged_with_stamp(file, stage_copy(stage, padded_copy), content, "", top, model,
                                                      extras); }).what(),
               Catch::Contains("tensor"));
    CHECK(slurp(model) == original);
    extras.tensors_of = source.get();
    write_staged_with_stamp(file, stage_copy(stage, padded_copy), content, "", top, model, extras);
    require_stamped(model, original);
  }
  SECTION("a copy the verdict calls dangerous is refused as its original would have been") {
    // What a worker whose native code swapped the model would hand back:
    // TorchScript that maps a file with torch.from_file(shared=True).
    const std::string evil = slurp(testdata("loadsafety/evil/from_file.pt"));
    const std::string evil_top = open_bytes(evil)->top_folder();
    ArchiveFile file(model, FileAccess::Edit, 10);
    const StagingFolder stage(model, original.size());
    const std::string staged = stage.path() + "/" + evil_top + ".pt";
    write_file(staged, evil);
    WorkerSettings settings;
    StagedExtras extras;
    extras.judged_as = &settings;
    const Error unsafe = error_of([&] { write_staged_with_stamp(file, staged, content, "", evil_top, model, extras); });
    CHECK(unsafe.kind() == ErrorKind::UnsafeToLoad);
    CHECK_THAT(unsafe.what(), Catch::StartsWith("the archive libtorch wrote is unsafe to load: dangerous:"));
    CHECK_THAT(unsafe.hint(), Catch::Contains("nothing was written"));
    CHECK(slurp(model) == original);
    settings.allow_unsafe_load = true;  // as the original was let through
    write_staged_with_stamp(file, staged, content, "", evil_top, model, extras);
    CHECK(slurp(model) != original);
  }
}
