// Digests, the producer-info stamp and verify, on archives written by PyTorch.
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <type_traits>

#include <fstream>

#include <nlohmann/json.hpp>

#include "archive_bytes.h"
#include "helpers.h"
#include "core/inspect/inspect.h"
#include "core/provenance/digest.h"
#include "base/error.h"
#include "core/edit/extra.h"
#include "core/provenance/producer_info.h"
#include "core/provenance/verify.h"
#include "core/provenance/checked_archive.h"
#include "core/edit/file_edit.h"
#include "format/zip_writer.h"

using namespace tsarchive;

namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

ContextOptions quiet_context(std::map<std::string, std::string> vars) {
  ContextOptions options;
  options.env = env_of(std::move(vars));
  options.git = false;
  options.host = false;
  return options;
}

std::string stamped_copy(const std::string& bytes, const std::string& epoch = "0") {
  const auto archive = open_bytes(bytes);
  StampContent content;
  content.context = collect_producer_context(quiet_context({{"SOURCE_DATE_EPOCH", epoch}}));
  content.method = "keep-bytes";
  content.archive_name = archive->top_folder();
  std::vector<std::pair<std::string, std::string>> digests;
  for (const RecordDigest& d : digest_records(*archive)) digests.emplace_back(d.name, d.sha256);
  content.digests = digests;
  return with_stamp(bytes, render_stamp(content));
}

}  // namespace

TEST_CASE("sha256 matches the published test vectors") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("record digests cover stored and deflated records, on any number of threads") {
  const auto archive = open_bytes(slurp(testdata("mlp_scripted.pt")));
  const std::vector<RecordDigest> one = digest_records(*archive, DigestOptions{1, {}, {}});
  const std::vector<RecordDigest> many = digest_records(*archive, DigestOptions{8, {}, {}});
  REQUIRE(one.size() == archive->records().size());
  bool saw_deflated = false;
  for (size_t i = 0; i < one.size(); ++i) {
    const Record& r = archive->records()[i];
    CHECK(one[i].name == r.name);
    CHECK(one[i].crc_ok);
    CHECK(one[i].problem.empty());
    CHECK(one[i].sha256 == sha256_hex(archive->read(r, 1 << 20)));  // libzip's inflate agrees with ours
    CHECK(many[i].sha256 == one[i].sha256);
    saw_deflated = saw_deflated || r.entry->method == 8;
  }
  CHECK(saw_deflated);
  const auto skipped = digest_records(*archive, DigestOptions{0, {"data.pkl"}, {}});
  CHECK(skipped.size() == one.size() - 1);
}

TEST_CASE("a flipped byte in a stored or deflated record is a CRC problem of that record") {
  const std::string original = slurp(testdata("mlp_scripted.pt"));
  const auto archive = open_bytes(original);
  for (const char* name : {"data/0", "code/__torch__/models.py"}) {
    const Record* r = archive->find(name);
    REQUIRE(r != nullptr);
    std::string damaged = original;
    damaged[r->entry->data_offset + r->entry->compressed_size / 2] ^= 0x10;
    const auto reopened = open_bytes(damaged);
    for (const RecordDigest& d : digest_records(*reopened)) {
      INFO(d.name << ": " << d.problem);
      CHECK(d.problem.empty() == (d.name != name));
    }
  }
}

TEST_CASE("the root digest is sha256sum's manifest, whatever the order") {
  const std::string a(64, 'a'), b(64, 'b');
  const std::string expected = sha256_hex(a + "  x\n" + b + "  y\n");
  CHECK(root_digest({{"x", a}, {"y", b}}) == expected);
  CHECK(root_digest({{"y", b}, {"x", a}}) == expected);
}

TEST_CASE("CI providers are read from their variables, and credentials never kept") {
  using Vars = std::map<std::string, std::string>;
  const std::vector<std::pair<Vars, CiInfo>> cases = {
      {{{"GITHUB_ACTIONS", "true"}, {"GITHUB_RUN_ID", "9"}, {"GITHUB_JOB", "export"},
        {"GITHUB_SERVER_URL", "https://x:tok@github.com"}, {"GITHUB_REPOSITORY", "o/r"}},
       {"github-actions", "9", "https://github.com/o/r/actions/runs/9", "export"}},
      {{{"GITLAB_CI", "true"}, {"CI_PIPELINE_ID", "5"}, {"CI_PIPELINE_URL", "https://gitlab/p/5"}, {"CI_JOB_NAME", "b"}},
       {"gitlab-ci", "5", "https://gitlab/p/5", "b"}},
      {{{"JENKINS_URL", "https://j"}, {"BUILD_NUMBER", "3"}, {"BUILD_URL", "https://u:p@j/3"}, {"JOB_NAME", "m"}},
       {"jenkins", "3", "https://j/3", "m"}},
      {{{"BUILDKITE", "true"}, {"BUILDKITE_BUILD_ID", "id"}, {"BUILDKITE_BUILD_URL", "https://bk/1"},
        {"BUILDKITE_STEP_KEY", "k"}},
       {"buildkite", "id", "https://bk/1", "k"}},
      {{{"CIRCLECI", "true"}, {"CIRCLE_BUILD_NUM", "4"}, {"CIRCLE_JOB", "j"}}, {"circleci", "4", "", "j"}},
      {{{"CI", "true"}}, {"generic", "", "", ""}},
  };
  for (const auto& [vars, want] : cases) {
    INFO(want.provider);
    const ProducerContext ctx = collect_producer_context(quiet_context(vars));
    REQUIRE(ctx.ci.has_value());
    CHECK(ctx.ci->provider == want.provider);
    CHECK(ctx.ci->run_id == want.run_id);
    CHECK(ctx.ci->run_url == want.run_url);
    CHECK(ctx.ci->job == want.job);
  }
  CHECK_FALSE(collect_producer_context(quiet_context({{"CI", "false"}})).ci.has_value());
  CHECK_FALSE(collect_producer_context(quiet_context({})).ci.has_value());
}

TEST_CASE("odd environment values are left out with a note") {
  const ProducerContext ctx = collect_producer_context(
      quiet_context({{"GITLAB_CI", "1"}, {"CI_PIPELINE_ID", std::string(5000, '7')}, {"CI_JOB_NAME", "a\nb"},
                     {"CI_JOB_URL", std::string("\xff\xfe")}}));
  REQUIRE(ctx.ci.has_value());
  CHECK(ctx.ci->run_id.empty());
  CHECK(ctx.ci->job.empty());
  CHECK(ctx.ci->run_url.empty());
  CHECK(ctx.notes.size() == 3);
}

TEST_CASE("URLs lose their credentials") {
  CHECK(strip_url_credentials("https://user:pw@host/a@b") == "https://host/a@b");
  CHECK(strip_url_credentials("https://token@host") == "https://host");
  CHECK(strip_url_credentials("https://host/path") == "https://host/path");
  CHECK(strip_url_credentials("git@github.com:org/repo.git") == "git@github.com:org/repo.git");
}

TEST_CASE("SOURCE_DATE_EPOCH fixes the time; a bad one is a usage error") {
  CHECK(collect_producer_context(quiet_context({{"SOURCE_DATE_EPOCH", "1700000000"}})).created_at ==
        "2023-11-14T22:13:20Z");
  CHECK(rfc3339_utc(0) == "1970-01-01T00:00:00Z");
  try {
    collect_producer_context(quiet_context({{"SOURCE_DATE_EPOCH", "soon"}}));
    FAIL("accepted a bad SOURCE_DATE_EPOCH");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Usage);
  }
}

TEST_CASE("the stamp is canonical JSON and parses back") {
  StampContent c;
  c.context = collect_producer_context(quiet_context({{"SOURCE_DATE_EPOCH", "0"}}));
  c.producer_version = "9.9";
  c.method = "keep-bytes";
  c.archive_name = "m";
  c.format_version = 3;
  c.digests = std::vector<std::pair<std::string, std::string>>{{"b", std::string(64, 'b')}, {"a", std::string(64, 'a')}};
  c.fields = {{"zeta", "1"}, {"alpha", "ü"}};
  const std::string text = render_stamp(c);
  CHECK(text == render_stamp(c));
  CHECK(text.find(' ') == std::string::npos);
  CHECK(text.find("\"_type\":\"https://tsarchive.dev/producer-info/v1\",\"alpha\":\"ü\",\"archive\"") == 1);
  const ParsedStamp parsed = parse_stamp(text, "f");
  CHECK(parsed.has_digests);
  CHECK(parsed.digests.size() == 2);
  CHECK(parsed.root == root_digest(*c.digests));
  CHECK(parsed.created_at == "1970-01-01T00:00:00Z");

  c.previous = text;
  const std::string next = render_stamp(c);
  CHECK(next.find("\"previous\":{\"createdAt\":\"1970-01-01T00:00:00Z\",\"root\":\"" + parsed.root +
                  "\",\"stampSha256\":\"" + sha256_hex(text) + "\"}") != std::string::npos);
}

TEST_CASE("reserved and malformed field keys are refused") {
  for (const char* key : {"_type", "entries", "previous", "source", "", "1abc", "a b", "a/b"}) {
    CHECK(stamp_field_problem(key).has_value());
  }
  for (const char* key : {"team", "model.card", "run-id", "x_1"}) CHECK_FALSE(stamp_field_problem(key).has_value());
  StampContent c;
  c.fields = {{"createdAt", "now"}};
  CHECK_THROWS_AS(render_stamp(c), Error);
  c.fields = {{"ok", std::string("\xff")}};
  CHECK_THROWS_AS(render_stamp(c), Error);
}

TEST_CASE("stamps of another schema or a newer major version are refused") {
  CHECK_THROWS_AS(parse_stamp("not json", "f"), Error);
  CHECK_THROWS_AS(parse_stamp(R"({"_type":"https://example.com/other/v1"})", "f"), Error);
  CHECK_THROWS_AS(parse_stamp(R"({"_type":"https://tsarchive.dev/producer-info/v2"})", "f"), Error);
  CHECK_THROWS_AS(
      parse_stamp(R"({"_type":"https://tsarchive.dev/producer-info/v1","entries":{"algorithm":"md5"}})", "f"), Error);
  CHECK_THROWS_AS(parse_stamp(R"({"_type":"https://tsarchive.dev/producer-info/v1",)"
                              R"("entries":{"algorithm":"sha256","records":{"a":"zz"},"root":"00"}})", "f"),
                  Error);
  CHECK_FALSE(parse_stamp(R"({"_type":"https://tsarchive.dev/producer-info/v1"})", "f").has_digests);
}

TEST_CASE("verify: intact, changed, added and missing records, unreadable versions") {
  const std::string stamped = stamped_copy(slurp(testdata("mlp_scripted.pt")));
  const VerifyOptions options{0, ReadableVersions{"1.13", 1, 10, 4, 9}};
  {
    const VerifyReport r = verify_archive(*open_bytes(stamped), options);
    CHECK(r.outcome() == VerifyOutcome::Intact);
    REQUIRE(r.stamp.has_value());
    CHECK(r.stamp->matches());
  }
  {  // an extra file changed, another added: the stamp says which
    const auto archive = open_bytes(stamped);
    const ExtraEditPlan plan = plan_extra_edits(*archive, {{"labels.json", std::string("[]")}, {"new.txt", std::string("x")}}, false);
    const ByteSource& source = archive->zip().source();
    const std::string edited = render_plan(plan.zip, 0, [&](uint64_t o, char* out, size_t n) { source.read_at(o, out, n); });
    const VerifyReport r = verify_archive(*open_bytes(edited), options);
    CHECK(r.outcome() == VerifyOutcome::Mismatch);
    CHECK(r.stamp->changed == std::vector<std::string>{"extra/labels.json"});
    CHECK(r.stamp->added == std::vector<std::string>{"extra/new.txt"});
    CHECK(r.stamp->missing.empty());
    CHECK_FALSE(r.stamp->root_matches);
  }
  {  // a format version newer than libtorch reads: not damage, its own outcome (exit 3 all the same)
    const VerifyReport r = verify_archive(*open_bytes(stamped), VerifyOptions{0, ReadableVersions{"old", 1, 2, 4, 9}});
    CHECK(r.outcome() == VerifyOutcome::Unreadable);
    CHECK(r.problems.empty());
    REQUIRE(r.unreadable.size() == 1);
    CHECK(r.unreadable.front() ==
          "written by a newer PyTorch: format version 3 is newer than libtorch old reads (1\u20132)");
    CHECK(verify_exit_code(r.outcome()) == 3);
    CHECK(verify_archive(*open_bytes(stamped), VerifyOptions{0, ReadableVersions{"new", 4, 10, 4, 9}})
              .unreadable.front()
              .rfind("written by an old PyTorch: format version 3 is older than", 0) == 0);
  }
  {  // unstamped: intact, with a note
    const VerifyReport r = verify_archive(*open_bytes(slurp(testdata("mlp_scripted.pt"))), options);
    CHECK(r.outcome() == VerifyOutcome::Intact);
    CHECK_FALSE(r.stamp.has_value());
    CHECK_FALSE(r.notes.empty());
  }
}

TEST_CASE("verify hashes records only where something compares the digests, unless asked for all") {
  const std::string plain = slurp(testdata("mlp_scripted.pt"));
  VerifyOptions options{0, ReadableVersions{"1.13", 1, 10, 4, 9}};
  options.all_sha256 = false;
  {  // unstamped, unsigned: CRC-32 alone, and the damage is still found
    const VerifyReport r = verify_archive(*open_bytes(plain), options);
    CHECK(r.outcome() == VerifyOutcome::Intact);
    CHECK_FALSE(r.sha256);
    for (const RecordDigest& d : r.records) CHECK(d.sha256.empty());
    std::string damaged = plain;
    const auto original = open_bytes(plain);
    const Record* data = original->find("data/0");
    REQUIRE(data != nullptr);
    damaged[data->entry->data_offset + data->entry->compressed_size / 2] ^= 0x10;
    CHECK(verify_archive(*open_bytes(damaged), options).outcome() == VerifyOutcome::Malformed);
  }
  {  // stamped: the stamp's digests are compared, so they are computed
    const VerifyReport r = verify_archive(*open_bytes(stamped_copy(plain)), options);
    CHECK(r.sha256);
    REQUIRE(r.stamp.has_value());
    CHECK(r.stamp->matches());
  }
  {  // asked for all (verify --json): every record's digest, stamp or not
    options.all_sha256 = true;
    const VerifyReport r = verify_archive(*open_bytes(plain), options);
    CHECK(r.sha256);
    for (const RecordDigest& d : r.records) CHECK(d.sha256.size() == 64);
  }
}

TEST_CASE("verify names the tensors behind a changed record") {
  // mlp_scripted_v2.pt carrying the stamp of mlp_scripted.pt: its tensor
  // records changed, and each is named by the tensors of the archive verified.
  const std::string v1 = stamped_copy(slurp(testdata("mlp_scripted.pt")));
  const auto stamped = open_bytes(v1);
  const std::string stamp = stamped->read(*stamped->find(kStampRecord), 1 << 20);
  const std::string v2 = with_stamp(slurp(testdata("mlp_scripted_v2.pt")), stamp);
  const VerifyReport r = verify_archive(*open_bytes(v2), VerifyOptions{0, ReadableVersions{"1.13", 1, 10, 4, 9}});
  REQUIRE(r.outcome() == VerifyOutcome::Mismatch);
  const auto in_v2 = tensors_by_record(read_torchscript_model(*open_bytes(v2)).model.tensors);
  size_t tensor_records = 0;
  for (const std::string& name : r.stamp->changed) {
    const auto expected = in_v2.find(name);
    if (expected == in_v2.end()) {
      CHECK(r.stamp->changed_tensors.count(name) == 0);
      continue;
    }
    ++tensor_records;
    CHECK(r.stamp->changed_tensors.at(name) == expected->second);
  }
  CHECK(tensor_records >= 9);
  CHECK(r.stamp->changed_tensors.at("data/9") == std::vector<std::string>{"head.weight"});

  TempDir dir;
  const std::string path = dir.file("v2.pt");
  std::ofstream(path, std::ios::binary) << v2;
  const CliResult text = run_cli({"verify", path});
  CHECK(text.code == 1);
  CHECK_THAT(text.out, Catch::Contains("  changed   data/9 (tensor head.weight)\n"));
  CHECK_THAT(text.out, Catch::Contains("  changed   extra/labels.json\n"));
  const auto doc = nlohmann::json::parse(run_cli({"verify", "--json", path}).out);
  CHECK(doc["stamp"]["changed_tensors"]["data/9"] == nlohmann::json::array({"head.weight"}));
}

TEST_CASE("diff --ignore-stamp and --ignore-extra: did the model change, whatever its provenance?") {
  TempDir dir;
  const std::string bytes = slurp(testdata("mlp_scripted.pt"));
  const std::string a = dir.file("a.pt"), b = dir.file("b.pt"), c = dir.file("c.pt");
  std::ofstream(a, std::ios::binary) << stamped_copy(bytes, "0");
  std::ofstream(b, std::ios::binary) << stamped_copy(bytes, "86400");  // the same model, stamped a day later
  const CliResult plain = run_cli({"diff", a, b});
  CHECK(plain.code == 1);
  CHECK_THAT(plain.out, Catch::Contains("changed  extra/producer_info.json"));
  const CliResult ignored = run_cli({"diff", "--ignore-stamp", a, b});
  CHECK(ignored.code == 0);
  CHECK_THAT(ignored.out, Catch::Contains(": same\n") &&
                              Catch::Contains("note: not compared, as asked: extra/producer_info.json"));
  CHECK(run_cli({"diff", "--ignore-stamp", testdata("mlp_scripted.pt"), b}).code == 0);  // one side unstamped

  // Another extra file changed: --ignore-stamp still sees it, --ignore-extra does not.
  const auto archive = open_bytes(slurp(b));
  const ExtraEditPlan plan = plan_extra_edits(*archive, {{"labels.json", std::string("[]")}}, false);
  const ByteSource& source = archive->zip().source();
  std::ofstream(c, std::ios::binary) << render_plan(plan.zip, 0, [&](uint64_t o, char* out, size_t n) { source.read_at(o, out, n); });
  CHECK(run_cli({"diff", "--ignore-stamp", a, c}).code == 1);
  const CliResult extra = run_cli({"diff", "--ignore-extra", "--json", a, c});
  CHECK(extra.code == 0);
  const auto doc = nlohmann::json::parse(extra.out);
  CHECK(doc["summary"]["records_ignored"].size() == 4);  // three extra files and the stamp
  // The tensors still count: a changed model is a change.
  CHECK(run_cli({"diff", "--ignore-extra", "--ignore-stamp", a, testdata("mlp_scripted_v2.pt")}).code == 1);
}

TEST_CASE("stamp: without a git checkout, the CI's own variables name the commit; the note only when nothing does") {
  using Vars = std::map<std::string, std::string>;
  const std::string sha(40, 'a'), sha2 = "0123456789abcdef0123456789abcdef01234567";
  const std::vector<std::pair<Vars, SourceInfo>> cases = {
      {{{"GITHUB_ACTIONS", "true"}, {"GITHUB_SHA", sha}, {"GITHUB_REF_NAME", "main"},
        {"GITHUB_SERVER_URL", "https://x:tok@github.com"}, {"GITHUB_REPOSITORY", "o/r"}},
       {"https://github.com/o/r", sha, "main", false, "github-actions"}},
      {{{"GITHUB_ACTIONS", "true"}, {"GITHUB_SHA", sha}, {"GITHUB_REF_NAME", "7/merge"}, {"GITHUB_HEAD_REF", "feature"}},
       {"", sha, "feature", false, "github-actions"}},  // a pull request: the branch it comes from
      {{{"GITLAB_CI", "true"}, {"CI_COMMIT_SHA", sha2}, {"CI_COMMIT_REF_NAME", "dev"},
        {"CI_PROJECT_URL", "https://gitlab.example/g/p"}},
       {"https://gitlab.example/g/p", sha2, "dev", false, "gitlab-ci"}},
      {{{"JENKINS_URL", "https://j"}, {"GIT_COMMIT", sha}, {"GIT_BRANCH", "origin/main"},
        {"GIT_URL", "https://u:p@git.example/r.git"}},
       {"https://git.example/r.git", sha, "origin/main", false, "jenkins"}},
      {{{"BUILDKITE", "true"}, {"BUILDKITE_COMMIT", sha}, {"BUILDKITE_BRANCH", "b"},
        {"BUILDKITE_REPO", "git@github.com:o/r.git"}},
       {"git@github.com:o/r.git", sha, "b", false, "buildkite"}},
      {{{"CIRCLECI", "true"}, {"CIRCLE_SHA1", sha}, {"CIRCLE_BRANCH", "c"},
        {"CIRCLE_REPOSITORY_URL", "https://github.com/o/r"}},
       {"https://github.com/o/r", sha, "c", false, "circleci"}},
  };
  TempDir not_a_checkout;
  const auto context = [&](const Vars& vars) {
    ContextOptions options = quiet_context(vars);
    options.git = true;
    options.git_dir = not_a_checkout.path.string();
    return collect_producer_context(options);
  };
  const auto source_notes = [](const ProducerContext& ctx) {
    size_t n = 0;
    for (const std::string& note : ctx.notes) n += note.rfind("source left out", 0) == 0 ? 1 : 0;
    return n;
  };
  for (const auto& [vars, want] : cases) {
    INFO(want.from_ci);
    const ProducerContext ctx = context(vars);
    REQUIRE(ctx.source.has_value());
    CHECK(ctx.source->commit == want.commit);
    CHECK(ctx.source->branch == want.branch);
    CHECK(ctx.source->repo == want.repo);
    CHECK(ctx.source->from_ci == want.from_ci);
    CHECK(source_notes(ctx) == 0);
    StampContent c;
    c.context = ctx;
    c.method = "keep-bytes";
    c.archive_name = "m";
    const std::string text = render_stamp(c);
    CHECK(text.find("\"source\":{\"") != std::string::npos);
    CHECK(text.find("\"from\":\"" + want.from_ci + "\"") != std::string::npos);
    CHECK(text.find("\"dirty\"") == std::string::npos);  // not known without a checkout
  }
  // Nothing names the commit (no CI; a CI whose commit variable is not a hash): one note.
  for (const Vars& vars : {Vars{}, Vars{{"BUILDKITE", "true"}, {"BUILDKITE_COMMIT", "HEAD"}}, Vars{{"CI", "true"}}}) {
    const ProducerContext ctx = context(vars);
    CHECK_FALSE(ctx.source.has_value());
    CHECK(source_notes(ctx) == 1);
  }
  // A checkout wins over the CI's variables.
  ContextOptions options = quiet_context(cases.front().first);
  options.git = true;
  options.git_dir = TSARCHIVE_TESTDATA_DIR;
  const ProducerContext in_checkout = collect_producer_context(options);
  if (in_checkout.source) CHECK(in_checkout.source->from_ci.empty());
}

TEST_CASE("the gate makes the only CheckedArchive: structure and CRCs, no digests, no stamp") {
  static_assert(!std::is_default_constructible_v<CheckedArchive>);
  static_assert(!std::is_constructible_v<CheckedArchive, const ArchiveFile&, const TorchArchive&, bool,
                                         std::optional<int64_t>>);
  TempDir dir;
  const std::string path = dir.file("stamped.pt");
  const std::string bytes = stamped_copy(slurp(testdata("mlp_scripted.pt")));
  std::ofstream(path, std::ios::binary) << bytes;
  {
    const ArchiveFile file(path, FileAccess::Read, 0);
    const TorchArchive archive(file.source());
    const CheckedArchive checked = check_for_libtorch(file, archive, "nothing was run");
    CHECK(checked.checked());
    CHECK(checked.file() == path);
    CHECK(checked.libtorch_path().rfind("/proc/self/fd/", 0) == 0);
    CHECK(checked.format_version().has_value());
    CHECK_FALSE(admit_unchecked(file, archive).checked());

    VerifyOptions structure;
    structure.digests = false;
    const VerifyReport r = verify_archive(archive, structure);
    CHECK(r.outcome() == VerifyOutcome::Intact);
    CHECK_FALSE(r.stamp.has_value());  // the stamp is verify's question
    for (const RecordDigest& d : r.records) CHECK(d.sha256.empty());
  }
  // One byte of tensor data flipped: the CRC catches it, and nothing reaches libtorch.
  const auto archive = open_bytes(bytes);
  const Record* data = nullptr;
  for (const Record& r : archive->records()) {
    if (r.kind == RecordKind::TensorData && r.entry->uncompressed_size > 0) data = &r;
  }
  REQUIRE(data != nullptr);
  std::string damaged = bytes;
  damaged[data->entry->data_offset] ^= 0x01;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << damaged;
  const ArchiveFile file(path, FileAccess::Read, 0);
  const TorchArchive opened(file.source());
  try {
    check_for_libtorch(file, opened, "nothing was run");
    FAIL("a damaged archive passed the gate");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK_THAT(e.what(), Catch::Contains("damaged") && Catch::Contains(data->name));
    CHECK(e.file() == path);
    CHECK_THAT(e.hint(), Catch::StartsWith("nothing was run"));
  }
}
