// Model signing's format (core/provenance/model_signature.h) without keys: names, the
// canonical order, the root digest, the statement and bundle round trip, the
// PAEs, bundles refused with the reason, and how an embedded statement is
// matched against an archive's records. And hashing a directory whose
// files change under it.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "base/base64.h"
#include "base/error.h"
#include "base/file_state.h"
#include "base/posix_fd.h"
#include "core/provenance/model_signature.h"
#include "core/provenance/signing.h"
#include "core/provenance/signing_embedded.h"
#include "helpers.h"

using namespace tsarchive;

namespace {

std::string bundle_refusal(std::string_view text) {
  try {
    parse_bundle(text);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::SignatureInvalid);
    return e.what();
  }
  return "accepted";
}

ModelStatement two_files() {
  ModelStatement s;
  s.model_name = "m";
  s.files = {{"sub/b.bin", std::string(64, 'b')}, {"a.b", std::string(64, 'a')}, {"a/z", std::string(64, 'c')}};
  sort_signed_files(s.files);
  s.ignore_paths = {".git", "model.sig"};
  return s;
}

// A key method's bundle over two_files() (its signature not a real one).
ModelBundle fake_key_bundle() {
  ModelBundle b;
  b.payload = statement_json(two_files());
  b.payload_type = std::string(kInTotoPayloadType);
  b.signature = "sig";
  b.has_public_key = true;
  b.key_hint = std::string(64, 'e');
  return b;
}

}  // namespace

TEST_CASE("signing: names a model may list") {
  CHECK(signed_name_problem(".").empty());
  CHECK(signed_name_problem("a/b.bin").empty());
  CHECK(signed_name_problem("../x").find("'..'") != std::string::npos);
  CHECK(signed_name_problem("a/../../x").find("'..'") != std::string::npos);
  CHECK(signed_name_problem("/etc/passwd") == "an absolute path");
  CHECK(signed_name_problem("a//b") == "an empty path component");
  CHECK(signed_name_problem("a/./b") == "a '.' component");
  CHECK(signed_name_problem("") == "an empty name");
}

TEST_CASE("signing: files sort by path components, as model_signing's PurePosixPath") {
  const ModelStatement s = two_files();
  // "a/z" before "a.b": the component "a" sorts before "a.b", though '/' > '.'.
  REQUIRE(s.files.size() == 3);
  CHECK(s.files[0].name == "a/z");
  CHECK(s.files[1].name == "a.b");
  CHECK(s.files[2].name == "sub/b.bin");
}

TEST_CASE("signing: a statement round-trips with its root digest") {
  ModelStatement s = two_files();
  const std::string text = statement_json(s);
  const ModelStatement back = parse_statement(text);
  CHECK(back.model_name == "m");
  CHECK(back.files.size() == 3);
  CHECK(back.root_sha256 == files_root_digest(s.files));
  CHECK(back.ignore_paths == s.ignore_paths);
  CHECK(back.predicate_type == std::string(kPredicateV1));
}

TEST_CASE("signing: statements with bad names or roots are refused") {
  ModelStatement s = two_files();
  s.files.push_back(s.files.front());
  CHECK_THROWS_WITH(parse_statement(statement_json(s)), Catch::Contains("twice"));
  s = two_files();
  s.files.push_back({"../up", std::string(64, 'd')});
  CHECK_THROWS_WITH(parse_statement(statement_json(s)), Catch::Contains("outside the model"));
  std::string text = statement_json(two_files());
  const size_t root = text.find(files_root_digest(two_files().files));
  text.replace(root, 64, std::string(64, '0'));
  CHECK_THROWS_WITH(parse_statement(text), Catch::Contains("root digest"));
}

TEST_CASE("signing: PAE of DSSE v1 and of model_signing 0.2") {
  CHECK(dsse_pae("{}") == "DSSEv1 28 application/vnd.in-toto+json 2 {}");
  // 0.2 put Python's repr of the bytes into a string.
  CHECK(dsse_pae_v02("{\"a\": 'x'}\n") == "DSSEV1 28 application/vnd.in-toto+json 11 b'{\"a\": \\'x\\'}\\n'");
  CHECK(dsse_pae_v02("it's") == "DSSEV1 28 application/vnd.in-toto+json 4 b\"it's\"");
  CHECK(dsse_pae_v02(std::string("\xff\x01", 2)) == "DSSEV1 28 application/vnd.in-toto+json 2 b'\\xff\\x01'");
}

TEST_CASE("signing: a bundle round-trips; malformed ones are refused with the reason") {
  const ModelBundle b = fake_key_bundle();
  const ModelBundle back = parse_bundle(bundle_json(b));
  CHECK(back.payload == b.payload);
  CHECK(back.signature == "sig");
  CHECK(back.key_hint == b.key_hint);

  CHECK(bundle_refusal("[[[[") .find("not a Sigstore bundle") != std::string::npos);
  CHECK(bundle_refusal(std::string(100, '[') + std::string(100, ']')).find("nested deeper") != std::string::npos);
  CHECK(bundle_refusal("{\"mediaType\": \"x\"}").find("media type") != std::string::npos);
  std::string text = bundle_json(b);
  CHECK(bundle_refusal(text.replace(text.find("\"tlogEntries\":[]"), 16, "\"tlogEntries\":[{}]")).find("transparency-log") !=
        std::string::npos);
  text = bundle_json(b);
  CHECK(bundle_refusal(text.replace(text.find("\"keyid\""), 0, "\"sig\":\"@@@@\",")).find("base64") != std::string::npos);
}

TEST_CASE("signing: a bundle with a member outside the Sigstore bundle format is refused, naming it") {
  const nlohmann::json good = nlohmann::json::parse(bundle_json(fake_key_bundle()));
  // As sigstore-models (model_signing's reader, extra="forbid"): nothing signs these members, and
  // with them a signature file could double as a file a loader reads (config.json).
  const auto refusal_with = [&](const nlohmann::json::json_pointer& where, const char* member) {
    nlohmann::json doc = good;
    doc[where][member] = "attacker-chosen";
    return bundle_refusal(doc.dump());
  };
  using pointer = nlohmann::json::json_pointer;
  CHECK_THAT(refusal_with(pointer(""), "model_type"),
             Catch::Contains("the bundle has the member \"model_type\", which the Sigstore bundle format does not have"));
  CHECK_THAT(refusal_with(pointer("/verificationMaterial"), "extra"),
             Catch::Contains("the bundle's verificationMaterial has the member \"extra\""));
  CHECK_THAT(refusal_with(pointer("/verificationMaterial/publicKey"), "rawBytes"),
             Catch::Contains("the bundle's publicKey has the member \"rawBytes\""));
  CHECK_THAT(refusal_with(pointer("/dsseEnvelope"), "note"), Catch::Contains("the DSSE envelope has the member \"note\""));
  CHECK_THAT(refusal_with(pointer("/dsseEnvelope/signatures/0"), "note"),
             Catch::Contains("the DSSE signature has the member \"note\""));
  // Members the format has, and tsarchive does not read, are no reason to refuse...
  nlohmann::json stamped = good;
  stamped["verificationMaterial"]["timestampVerificationData"] = {{"rfc3161Timestamps", {{{"signedTimestamp", "AAAA"}}}}};
  CHECK(bundle_refusal(stamped.dump()) == "accepted");
  // ...but what is inside them is held to the format too.
  stamped["verificationMaterial"]["timestampVerificationData"]["rfc3161Timestamps"][0]["x"] = 1;
  CHECK_THAT(bundle_refusal(stamped.dump()), Catch::Contains("an RFC 3161 timestamp has the member \"x\""));
  nlohmann::json message = good;
  message["messageSignature"] = {{"signature", "AAAA"}};
  CHECK_THAT(bundle_refusal(message.dump()), Catch::Contains("messageSignature"));
  nlohmann::json two_signers = good;
  two_signers["verificationMaterial"]["certificate"] = {{"rawBytes", "AAAA"}};
  CHECK_THAT(bundle_refusal(two_signers.dump()), Catch::Contains("more than one of publicKey"));
}

TEST_CASE("signing: an embedded statement must list exactly the other records") {
  SignatureCheck check;
  check.embedded = true;
  check.statement.files = {{"data.pkl", std::string(64, 'a')}, {"data/0", std::string(64, 'b')},
                           {"extra/labels.txt", std::string(64, 'c')}};
  auto record = [](std::string name, char digest) {
    RecordDigest d;
    d.name = std::move(name);
    d.sha256 = std::string(64, digest);
    d.crc_ok = true;
    return d;
  };
  // The signature's own record is never compared; a renamed record is one missing and one added.
  const std::vector<RecordDigest> records = {record("data.pkl", 'a'), record("data/0", 'x'),
                                             record("extra/labelz.txt", 'c'), record(kEmbeddedSignatureRecord, 'f')};
  match_embedded_records(check, records, "m.pt");
  CHECK(check.changed == std::vector<std::string>{"data/0"});
  CHECK(check.missing == std::vector<std::string>{"extra/labels.txt"});
  CHECK(check.added == std::vector<std::string>{"extra/labelz.txt"});
  CHECK_FALSE(check.matches());

  SignatureCheck exact;
  exact.statement.files = {{"data.pkl", std::string(64, 'a')}};
  match_embedded_records(exact, {record("data.pkl", 'a'), record(kEmbeddedSignatureRecord, 'f')}, "m.pt");
  CHECK(exact.matches());

  // A damaged record is damage (exit 3), named, not a difference.
  RecordDigest damaged = record("data/0", 'b');
  damaged.sha256.clear();
  damaged.problem = "CRC-32 mismatch";
  SignatureCheck on_damage;
  on_damage.statement.files = exact.statement.files;
  try {
    match_embedded_records(on_damage, {record("data.pkl", 'a'), damaged}, "m.pt");
    FAIL("a damaged record was compared");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK(std::string(e.what()).find("'data/0'") != std::string::npos);
  }
}

namespace {

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("signing: a state taken by settled_file_state sees a write made right after it") {
  // The kernel's ctime tick is coarse: a state taken in the tick of the last
  // write could miss the next. The settled one never does.
  TempDir dir;
  const std::filesystem::path file = dir.path / "f";
  for (int i = 0; i < 20; ++i) {
    write_text(file, "version one");
    const Fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(fd.get() >= 0);
    const FileState before = settled_file_state(fd.get(), file.string(), ErrorKind::CheckFailed);
    write_text(file, "version two");  // the same size: only the times tell
    FileState after;
    REQUIRE(current_file_state(fd.get(), after));
    CHECK(after != before);
  }
}

TEST_CASE("signing: a file's state is trusted once its ctime is a clock tick old, two seconds on whole seconds") {
  // On a file system that keeps whole seconds a same-size rewrite within the
  // second leaves the state as it was (review 58 F1: a malicious rewrite
  // signed 2 in 20 runs on a 1 s ext4). settled_file_state waits these out,
  // and refuses a file whose ctime keeps changing for 3 s.
  const int64_t s = 1'000'000'000;
  const auto state = [](int64_t seconds, int64_t ns) { return FileState{seconds, ns, seconds, ns, 10}; };
  const int64_t now = 1'700'000'000 * s + 500'000'000;
  CHECK(settle_wait_ns(state(1'700'000'000, 495'000'000), now) > 0);   // 5 ms ago
  CHECK(settle_wait_ns(state(1'700'000'000, 470'000'000), now) == 0);  // 30 ms ago
  CHECK(settle_wait_ns(state(1'700'000'000, 0), now) > 1 * s);         // whole seconds, this second
  CHECK(settle_wait_ns(state(1'699'999'999, 0), now) > 0);             // the second before
  CHECK(settle_wait_ns(state(1'699'999'997, 0), now) == 0);            // 2.5 s ago
  CHECK(settle_wait_ns(state(1'700'003'600, 0), now) == 0);            // an hour ahead: no shared tick
}

TEST_CASE("signing: a directory's file that changes between listing and hashing is refused, never waited on") {
  // hash_all hashes the largest file first on one thread; the check run
  // beside its hash changes the small one, as a folder's owner could.
  TempDir dir;
  const std::filesystem::path model = dir.path / "model";
  std::filesystem::create_directory(model);
  write_text(model / "big.bin", std::string(1 << 20, 'b'));
  write_text(model / "small.bin", "s");
  write_text(dir.path / "outside.txt", "a file outside the model");
  ModelFilesOptions options;
  options.threads = 1;
  const auto changing_small = [&](const std::function<void()>& change) {
    options.check_opened = [&, change](const std::string& path, const ByteSource&, std::pair<uint64_t, uint64_t>) {
      if (path.find("big.bin") != std::string::npos) change();
    };
  };

  SECTION("a pipe: refused, not opened for ever") {
    changing_small([&] {
      std::filesystem::remove(model / "small.bin");
      REQUIRE(::mkfifo((model / "small.bin").c_str(), 0600) == 0);
    });
    CHECK_THROWS_WITH(hash_model_files(model.string(), options),
                      Catch::Contains("became something other than a regular file"));
  }
  SECTION("a symbolic link out of the folder, links not allowed: refused, not followed") {
    changing_small([&] {
      std::filesystem::remove(model / "small.bin");
      std::filesystem::create_symlink(dir.path / "outside.txt", model / "small.bin");
    });
    CHECK_THROWS_WITH(hash_model_files(model.string(), options), Catch::Contains("became a symbolic link"));
  }
  SECTION("written in place while it is hashed and checked: refused") {
    options.check_opened = [&](const std::string& path, const ByteSource&, std::pair<uint64_t, uint64_t>) {
      if (path.find("big.bin") == std::string::npos) return;
      // In place and at the same size (no truncation the hash could trip on).
      std::fstream(model / "big.bin", std::ios::in | std::ios::out | std::ios::binary) << std::string(1 << 20, 'e');
    };
    try {
      hash_model_files(model.string(), options);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::CheckFailed);
      CHECK_THAT(e.what(), Catch::Contains("written while it was being read"));
    }
  }
  SECTION("left alone: both hashed") {
    CHECK(hash_model_files(model.string(), options).size() == 2);
  }
}
