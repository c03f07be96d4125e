// verify as an operation (operations/verify.h): the file is opened once, so an
// archive swapped at its path while verify runs cannot have its records
// checked in one file and its embedded signature read from another.
#include <stdio.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/edit/file_edit.h"
#include "core/provenance/signing_embedded.h"
#include "helpers.h"
#include "operations/verify.h"

using namespace tsarchive;

namespace {

// A P-256 key pair made by the openssl command: `dir`/k.key and `dir`/k.pub.
bool make_key(const std::filesystem::path& dir) {
  const std::string key = (dir / "k.key").string(), pub = (dir / "k.pub").string();
  const std::string command = "openssl ecparam -name prime256v1 -genkey -noout -out '" + key +
                              "' 2>/dev/null && openssl ec -in '" + key + "' -pubout -out '" + pub + "' 2>/dev/null";
  return std::system(command.c_str()) == 0;
}

void sign_embedded(const std::string& archive_path, const std::string& key_file) {
  const SignerKeys keys = read_signer_keys(key_file, "", "", {});
  ArchiveFile file(archive_path, FileAccess::Edit, 10);
  const auto archive = open_torchscript_archive(file.source(), "cannot sign this file");
  embed_signature(file, *archive, keys, "", 1);
}

}  // namespace

TEST_CASE("verify: the embedded signature is read from the file whose records were checked") {
  TempDir dir;
  if (!make_key(dir.path)) {
    WARN("no openssl command: skipped");
    return;
  }
  const std::string signed_path = (dir.path / "m.pt").string(), unsigned_path = (dir.path / "other.pt").string();
  std::filesystem::copy_file(testdata("mlp_scripted.pt"), signed_path);
  std::filesystem::copy_file(testdata("mlp_scripted.pt"), unsigned_path);
  sign_embedded(signed_path, (dir.path / "k.key").string());
  // A journal beside the archive makes opening it say so: the note comes once
  // the file is open, and then the path is given another (unsigned) archive.
  std::ofstream(dir.path / ".m.pt.tsarchive-journal") << "planted";

  VerifySettings settings;
  settings.model = signed_path;
  settings.key = (dir.path / "k.pub").string();
  settings.threads = 1;
  bool swapped = false;
  const NoteSink swap_on_note = [&](const std::string&) {
    if (!swapped) swapped = ::rename(unsigned_path.c_str(), signed_path.c_str()) == 0;
  };
  const VerifyResult result = verify_model(settings, swap_on_note);
  REQUIRE(swapped);
  REQUIRE(result.signature.check);
  CHECK(result.signature.check->embedded);
  CHECK(result.signature.check->matches());
  CHECK_FALSE(result.signature_fails);
  CHECK(result.exit_code == 0);

  // The path now names the unsigned archive: verified again, it has no signature (exit 7)...
  try {
    verify_model(settings, [](const std::string&) {});
    FAIL("an unsigned archive passed with a key given");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::SignatureInvalid);
    CHECK(std::string(e.what()).find("not signed") != std::string::npos);
  }
  // ...which --allow-unsigned lets pass.
  settings.allow_unsigned = true;
  const VerifyResult after = verify_model(settings, [](const std::string&) {});
  CHECK_FALSE(after.signature.check);
  CHECK(after.exit_code == 0);
}

TEST_CASE("verify: a detached signature is checked against the file whose records were checked") {
  TempDir dir;
  if (!make_key(dir.path)) {
    WARN("no openssl command: skipped");
    return;
  }
  // The path first names an unsigned archive; once verify has it open, the
  // signed one is renamed over it. Hashing the path again would find the
  // signed bytes and vouch for the unsigned archive verify checked.
  const std::string path = (dir.path / "m.pt").string(), signed_path = (dir.path / "signed.pt").string();
  const std::string signature = (dir.path / "signed.pt.sig").string();
  std::filesystem::copy_file(testdata("mlp_scripted.pt"), signed_path);
  std::filesystem::copy_file(testdata("convnet_traced.pt"), path);
  SignRequest request;
  request.model = signed_path;
  request.signature_path = signature;
  request.keys = read_signer_keys((dir.path / "k.key").string(), "", "", {});
  std::ofstream(signature) << sign_model(request).bundle;
  std::ofstream(dir.path / ".m.pt.tsarchive-journal") << "planted";

  VerifySettings settings;
  settings.model = path;
  settings.key = (dir.path / "k.pub").string();
  settings.signature = signature;
  settings.threads = 1;
  bool swapped = false;
  const VerifyResult result = verify_model(settings, [&](const std::string&) {
    if (!swapped) swapped = ::rename(signed_path.c_str(), path.c_str()) == 0;
  });
  REQUIRE(swapped);
  REQUIRE(result.signature.check);
  CHECK_FALSE(result.signature.check->matches());
  CHECK(result.signature_fails);
  CHECK(result.exit_code == 1);

  // Verified again, the path names the signed archive, and it passes.
  const VerifyResult after = verify_model(settings, [](const std::string&) {});
  REQUIRE(after.signature.check);
  CHECK(after.signature.check->matches());
  CHECK(after.exit_code == 0);
}

namespace {

// `path`'s bytes with one bit of record `name`'s stored data flipped (its CRC-32 left as it was).
std::string with_flipped_record_byte(const std::string& path, const std::string& name) {
  std::string bytes = slurp(path);
  const TorchArchive archive(open_file_source(path));
  const Record* record = archive.find(name);
  REQUIRE(record != nullptr);
  REQUIRE(record->entry->stored());
  bytes[record->entry->data_offset + record->entry->uncompressed_size / 2] ^= 1;
  return bytes;
}

}  // namespace

TEST_CASE("verify: a torch.save ZIP whose tensor record fails its CRC-32 is damaged (exit 3), naming the record") {
  TempDir dir;
  const std::string path = (dir.path / "flipped.pth").string();
  std::ofstream(path, std::ios::binary) << with_flipped_record_byte(testdata("state_dict.pth"), "data/0");
  VerifySettings settings;
  settings.model = path;
  settings.threads = 1;
  const VerifyResult result = verify_model(settings, [](const std::string&) {});
  CHECK(result.by == VerifiedBy::LoadSafety);
  CHECK(result.kind == FileKind::TorchSave);
  REQUIRE(result.problems.size() == 1);
  CHECK_THAT(result.problems.front(), Catch::Contains("record 'data/0'") && Catch::Contains("CRC-32"));
  CHECK(result.exit_code == 3);
  REQUIRE(result.findings.size() == 1);
  CHECK_THAT(result.findings.front().what(), Catch::Contains("damaged") && Catch::Contains("data/0"));

  const CliResult cli = run_cli({"verify", path});
  CHECK(cli.code == 3);
  CHECK_THAT(cli.out.substr(0, cli.out.find('\n')), Catch::EndsWith(": DAMAGED (torch.save file (not TorchScript))"));
  CHECK_THAT(cli.out, !Catch::Contains("safe to load"));
  const CliResult json = run_cli({"verify", "--json", path});
  const auto doc = nlohmann::json::parse(json.out);
  CHECK(doc["outcome"] == "malformed");
  CHECK(doc["problems"].size() == 1);

  // The same file whole passes.
  settings.model = testdata("state_dict.pth");
  CHECK(verify_model(settings, [](const std::string&) {}).exit_code == 0);
}

TEST_CASE("verify: a signed torch.save file that changed leads with the failing signature") {
  TempDir dir;
  if (!make_key(dir.path)) {
    WARN("no openssl command: skipped");
    return;
  }
  const std::string path = (dir.path / "m.pth").string();
  std::filesystem::copy_file(testdata("state_dict.pth"), path);
  REQUIRE(run_cli({"sign", path, "--key", (dir.path / "k.key").string()}).code == 0);
  // Another tensor value, its CRC-32 right: the records are whole, the model is not what was signed.
  const TorchArchive original(open_file_source(testdata("state_dict.pth")));
  std::string changed = original.read(*original.find("data/0"), 1 << 20);
  changed[0] ^= 1;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << archive_with_record(testdata("state_dict.pth"), "data/0", changed);

  const CliResult r = run_cli({"verify", path, "--key", (dir.path / "k.pub").string()});
  CHECK(r.code == 1);
  CHECK_THAT(r.out.substr(0, r.out.find('\n')),
             Catch::EndsWith(": SIGNATURE FAILS; the records are intact and safe to load (torch.save file (not TorchScript))"));
}

TEST_CASE("verify: a torch.package archive is unsafe to load (exit 8), naming the modules PackageImporter runs") {
  VerifySettings settings;
  settings.model = testdata("torch_package/scaler_package.pt");
  settings.threads = 1;
  const VerifyResult result = verify_model(settings, [](const std::string&) {});
  CHECK(result.kind == FileKind::TorchPackage);
  CHECK(result.unsafe);
  CHECK(result.exit_code == 8);
  REQUIRE(result.safety.findings.size() == 1);
  CHECK(result.safety.findings.front().risk == LoadRisk::Dangerous);
  CHECK_THAT(result.safety.findings.front().what, Catch::Contains("toypkg.scaler"));
}

TEST_CASE("verify: a ZIP refused for names a loader still reads is unsafe (exit 8), not damaged (3)") {
  for (const char* rel : {"loadsafety/crafted/zip_aoti_traversal.pt2", "loadsafety/crafted/zip_legacy_nul_name.pt2",
                          "loadsafety/crafted/zip_legacy_dup_name.pt2", "hostile/nul_in_name.pt"}) {
    INFO(rel);
    VerifySettings settings;
    settings.model = testdata(rel);
    settings.threads = 1;
    const VerifyResult result = verify_model(settings, [](const std::string&) {});
    CHECK(result.unsafe);
    CHECK(result.exit_code == 8);
    CHECK(result.safety.worst() == LoadRisk::Crafted);
  }
  // Damage without such names still exits 3.
  VerifySettings settings;
  settings.model = testdata("hostile/cd_offset_past_end.pt");
  settings.threads = 1;
  try {
    verify_model(settings, [](const std::string&) {});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.exit_code() == 3);
  }
}
