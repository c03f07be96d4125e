// verify as an operation (operations/verify.h): the file is opened once, so an
// archive swapped at its path while verify runs cannot have its records
// checked in one file and its embedded signature read from another. And
// signing and verifying on disk, with keys and certificates the openssl
// command makes: a directory's signature file that is a symbolic link, links
// added to a signed directory, verify's --ignore-paths, and which
// certificates may sign (RFC 5280's key usage and extended key usage).
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/base64.h"
#include "base/bounded_json.h"
#include "base/posix_fd.h"
#include "core/edit/file_edit.h"
#include "core/inspect/inspect.h"
#include "core/provenance/checked_archive.h"
#include "core/provenance/model_signature.h"
#include "core/provenance/signing.h"
#include "core/provenance/signing_crypto.h"
#include "core/provenance/verify.h"
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
  const CliResult as_json = run_cli({"verify", "--json", path});
  const auto doc = nlohmann::json::parse(as_json.out);
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

namespace {

bool run_openssl(const std::string& args) { return std::system(("openssl " + args + " >/dev/null 2>&1").c_str()) == 0; }

// A P-256 key pair: `dir`/signer.key and `dir`/signer.pub.
bool make_signer_key(const std::filesystem::path& dir) {
  const std::string key = "'" + (dir / "signer.key").string() + "'";
  return run_openssl("ecparam -name prime256v1 -genkey -noout -out " + key) &&
         run_openssl("ec -in " + key + " -pubout -out '" + (dir / "signer.pub").string() + "'");
}

// `dir`/model, two files a loader reads, signed with `dir`/signer.key into model/model.sig.
std::string signed_model_directory(const std::filesystem::path& dir, bool allow_symlinks = false) {
  const std::filesystem::path model = dir / "model";
  std::filesystem::create_directories(model);
  std::ofstream(model / "weights.bin") << "weights";
  std::ofstream(model / "tokenizer.json") << "{\"tokenizer\": \"signed\"}";
  SignRequest request;
  request.model = model.string();
  request.signature_path = (model / "model.sig").string();
  request.keys = read_signer_keys((dir / "signer.key").string(), "", "", {});
  request.files.allow_symlinks = allow_symlinks;
  request.files.threads = 1;
  const std::string bundle = sign_model(request).bundle;
  std::ofstream(model / "model.sig") << bundle;
  return model.string();
}

VerifyResult verify_directory(const std::filesystem::path& dir, const std::vector<std::string>& ignore_paths = {}) {
  VerifySettings settings;
  settings.model = (dir / "model").string();
  settings.key = (dir / "signer.pub").string();
  settings.ignore_paths = ignore_paths;
  settings.threads = 1;
  return verify_model(settings, [](const std::string&) {});
}

// The attacker's move: config.json, a file the loader reads, holds the signature
// file's bundle, and model.sig becomes a link to it.
void signature_becomes_link_to_config(const std::string& model) {
  std::filesystem::rename(model + "/model.sig", model + "/config.json");
  std::filesystem::create_symlink("config.json", model + "/model.sig");
}

}  // namespace

TEST_CASE("signing: a directory's signature file is left out by its own name, never a link's target") {
  TempDir dir;
  if (!make_signer_key(dir.path)) {
    WARN("no openssl command: skipped");
    return;
  }
  const std::string model = signed_model_directory(dir.path);
  signature_becomes_link_to_config(model);
  CHECK(path_inside_model(model, model + "/model.sig") == std::optional<std::string>("model.sig"));
  CHECK(path_inside_model(model + "/", model + "/./sub/../model.sig/") == std::optional<std::string>("model.sig"));
  CHECK_FALSE(path_inside_model(model, model + "/../other"));
  // As model_signing: a signature file that is a link is refused (exit 7), at verify...
  const Error refused = error_of([&] { verify_directory(dir.path); }, ErrorKind::SignatureInvalid,
                                 "the signature file 'model.sig' inside the model is a symbolic link");
  CHECK(refused.exit_code() == 7);
  // ...and at sign.
  SignRequest request;
  request.model = model;
  request.signature_path = model + "/model.sig";
  request.keys = read_signer_keys((dir.path / "signer.key").string(), "", "", {});
  error_of([&] { sign_model(request); }, ErrorKind::Usage, "is a symbolic link");
}

TEST_CASE("signing: where links are allowed, a signature that is a link still leaves out only its own name") {
  TempDir dir;
  if (!make_signer_key(dir.path)) {
    WARN("no openssl command: skipped");
    return;
  }
  const std::string model = signed_model_directory(dir.path, true);
  signature_becomes_link_to_config(model);
  const VerifyResult result = verify_directory(dir.path);
  REQUIRE(result.signature.check);
  CHECK(result.signature.check->added == std::vector<std::string>{"config.json"});
  CHECK(result.exit_code == 1);
}

TEST_CASE("verify: a symbolic link in a signed directory is a change (exit 1) that names it") {
  TempDir dir;
  if (!make_signer_key(dir.path)) {
    WARN("no openssl command: skipped");
    return;
  }
  const std::string model = signed_model_directory(dir.path);
  std::filesystem::create_symlink("weights.bin", model + "/lnk");
  VerifyResult result = verify_directory(dir.path);
  CHECK(result.exit_code == 1);
  REQUIRE(result.findings.size() == 1);
  CHECK_THAT(result.findings.front().what(), Catch::Contains("'lnk' added (a symbolic link, not signed)"));

  // A signed file replaced by a link to a copy: changed, and said to be a link now.
  std::filesystem::remove(model + "/lnk");
  std::filesystem::rename(model + "/weights.bin", dir.path / "weights.bin");
  std::filesystem::create_symlink(dir.path / "weights.bin", model + "/weights.bin");
  result = verify_directory(dir.path);
  CHECK(result.exit_code == 1);
  REQUIRE(result.findings.size() == 1);
  CHECK_THAT(result.findings.front().what(), Catch::Contains("'weights.bin' changed (now a symbolic link)"));
}

TEST_CASE("verify: --ignore-paths from the current directory, as sign and model_signing take them") {
  TempDir dir;
  if (!make_signer_key(dir.path)) {
    WARN("no openssl command: skipped");
    return;
  }
  const std::string model = signed_model_directory(dir.path);
  std::ofstream(model + "/scratch.txt") << "not signed";
  CHECK(verify_directory(dir.path).exit_code == 1);
  // A path from here (absolute: whatever the current directory) that lies in the model.
  CHECK(verify_directory(dir.path, {model + "/scratch.txt"}).exit_code == 0);
  // A name relative to the model, which names nothing from here, still works.
  REQUIRE_FALSE(std::filesystem::exists("scratch.txt"));
  CHECK(verify_directory(dir.path, {"scratch.txt"}).exit_code == 0);
  error_of([&] { verify_directory(dir.path, {"../scratch.txt"}); }, ErrorKind::Usage, "not a path inside the model");
}

TEST_CASE("signing: --ignore-paths sub/ names the folder sub, as sub, ./sub and model_signing do (review 57b, F7)") {
  TempDir dir;
  if (!make_signer_key(dir.path)) {
    WARN("no openssl command: skipped");
    return;
  }
  const std::string model = signed_model_directory(dir.path);
  std::filesystem::create_directories(model + "/sub");
  std::ofstream(model + "/sub/b.txt") << "not signed";
  REQUIRE_FALSE(std::filesystem::exists("sub"));  // relative to the model, not to here
  for (const std::string p : {"sub", "sub/", "./sub//"}) {
    CHECK(ignore_paths_in_model(model, {p}) == std::vector<std::string>{"sub"});
  }
  CHECK(verify_directory(dir.path).exit_code == 1);
  CHECK(verify_directory(dir.path, {"sub/"}).exit_code == 0);
  error_of([&] { ignore_paths_in_model(model, {"../sub/"}); }, ErrorKind::Usage, "not a path inside the model");
  error_of([&] { ignore_paths_in_model(model, {"/"}); }, ErrorKind::Usage, "not a path inside the model");
}

TEST_CASE("sign DIR: a path longer than PATH_MAX is an I/O error naming it, not a pipe (review 57b, F6)") {
  TempDir dir;
  if (!make_signer_key(dir.path)) {
    WARN("no openssl command: skipped");
    return;
  }
  const std::filesystem::path model = dir.path / "model";
  std::filesystem::create_directories(model);
  std::ofstream(model / "weights.bin") << "weights";
  const std::string component(250, 'd');
  int fd = ::open(model.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (int i = 0; i < 17 && fd >= 0; ++i) {  // model/ddd.../ddd...: about 4,250 characters
    REQUIRE(::mkdirat(fd, component.c_str(), 0755) == 0);
    const int next = ::openat(fd, component.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ::close(fd);
    fd = next;
  }
  REQUIRE(fd >= 0);
  ::close(fd);
  SignRequest request;
  request.model = model.string();
  request.signature_path = (model / "model.sig").string();
  request.keys = read_signer_keys((dir.path / "signer.key").string(), "", "", {});
  request.files.threads = 1;
  const Error e =
      error_of([&] { sign_model(request); }, ErrorKind::Io, "cannot read '" + component.substr(0, 200) + "... (");
  CHECK_THAT(e.what(), Catch::Contains("File name too long") && !Catch::Contains("pipe"));
  CHECK(e.exit_code() == 4);
  const Fd top(::open(dir.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  CHECK(remove_tree_at(top.get(), "model"));  // deeper than std::filesystem::remove_all goes
}

namespace {

// `names` as a statement of model "m", each with a placeholder digest.
ModelStatement statement_of_names(const std::vector<std::string>& names) {
  ModelStatement s;
  s.model_name = "m";
  s.ignore_paths = {".git", "model.sig"};
  for (const std::string& name : names) s.files.push_back(SignedFile{name, std::string(64, 'a')});
  return s;
}

std::vector<std::string> numbered_names(size_t count) {
  std::vector<std::string> names(count);
  for (size_t i = 0; i < count; ++i) {
    const std::string digits = std::to_string(i);
    names[i] = "f" + std::string(digits.size() < 7 ? 7 - digits.size() : 0, '0') + digits;  // sorted as numbers
  }
  return names;
}

}  // namespace

TEST_CASE("sign writes no signature its own verify refuses: the most files it signs, verify reads (review 57b, F5)") {
  // 160,000 files were signed (exit 0) and verify refused them, exit 7: "the signed statement is not JSON".
  TempDir dir;
  if (!make_signer_key(dir.path)) {
    WARN("no openssl command: skipped");
    return;
  }
  const SignerKeys keys = read_signer_keys((dir.path / "signer.key").string(), "", "", {});
  // The statement's values besides its files, and 7 a file (less the one comma of a list of one).
  const uint64_t others = measure_json(statement_json(statement_of_names({}))).values;
  const size_t most = static_cast<size_t>((kMaxStatementValues - others + 1) / kStatementValuesPerFile);
  std::vector<std::string> names = numbered_names(most + 1);
  const Error refused =
      error_of([&] { sign_statement(statement_of_names(names), keys); }, ErrorKind::Usage,
               "the signed statement would be more than verify reads: JSON of more than 1048576 values");
  CHECK_THAT(refused.hint(), Catch::Contains("--ignore-paths"));
  names.pop_back();
  const SignResult signed_most = sign_statement(statement_of_names(names), keys);
  const ModelBundle bundle = parse_bundle(signed_most.bundle);
  CHECK(parse_statement(bundle.payload).files.size() == most);
}

TEST_CASE("sign DIR: a directory whose signature verify would not read is refused before any file is hashed") {
  // ~12,600 files with 4 KB paths: a 70 MB signature, which verify refuses (over 64 MiB).
  TempDir dir;
  if (!make_signer_key(dir.path)) {
    WARN("no openssl command: skipped");
    return;
  }
  std::filesystem::path folder = dir.path / "model";
  for (int i = 0; i < 15; ++i) folder /= std::string(250, static_cast<char>('a' + i));
  std::filesystem::create_directories(folder);
  const Fd fd(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  for (const std::string& name : numbered_names(12600)) {
    const Fd file(::openat(fd.get(), (name + std::string(240, 'f')).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    REQUIRE(file.get() >= 0);
  }
  SignRequest request;
  request.model = (dir.path / "model").string();
  request.signature_path = request.model + "/model.sig";
  request.keys = read_signer_keys((dir.path / "signer.key").string(), "", "", {});
  request.files.threads = 1;
  size_t hashed = 0;
  request.files.check_opened = [&](const std::string&, const ByteSource&, std::pair<uint64_t, uint64_t>) { ++hashed; };
  const Error e = error_of([&] { sign_model(request); }, ErrorKind::Usage, "more than the 64 MiB verify reads");
  CHECK(e.file() == request.model);
  CHECK(hashed == 0);
  CHECK_FALSE(std::filesystem::exists(request.signature_path));
}

namespace {

// A root CA in `dir` (ca.key, ca.pem), and certificates for signer.key it
// issues with the extensions `ext` (openssl's extfile lines): `dir`/NAME.pem.
bool make_ca(const std::filesystem::path& dir) {
  const std::string ca = "'" + (dir / "ca").string();
  return run_openssl("ecparam -name prime256v1 -genkey -noout -out " + ca + ".key'") &&
         run_openssl("req -x509 -new -key " + ca + ".key' -subj /CN=Test-Root -days 2 -addext "
                     "basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign -out " + ca + ".pem'") &&
         run_openssl("req -new -key '" + (dir / "signer.key").string() + "' -subj /CN=signer -out '" +
                     (dir / "signer.csr").string() + "'");
}

std::string issue_certificate(const std::filesystem::path& dir, const std::string& name, const std::string& ext) {
  const std::string ext_file = (dir / (name + ".ext")).string(), pem = (dir / (name + ".pem")).string();
  std::ofstream(ext_file) << "basicConstraints=critical,CA:FALSE\n" << ext;
  const std::string ca = "'" + (dir / "ca").string();
  REQUIRE(run_openssl("x509 -req -in '" + (dir / "signer.csr").string() + "' -CA " + ca + ".pem' -CAkey " + ca +
                      ".key' -CAcreateserial -days 1 -extfile '" + ext_file + "' -out '" + pem + "'"));
  return pem;
}

SignRequest certificate_request(const std::filesystem::path& dir, const std::string& certificate) {
  SignRequest request;
  request.model = (dir / "m.bin").string();
  request.signature_path = request.model + ".sig";
  request.keys = read_signer_keys((dir / "signer.key").string(), "", certificate, {});
  return request;
}

}  // namespace

TEST_CASE("signing: a certificate signs only where each usage extension present allows it (RFC 5280)") {
  TempDir dir;
  if (!make_signer_key(dir.path) || !make_ca(dir.path)) {
    WARN("no openssl command: skipped");
    return;
  }
  std::ofstream(dir.path / "m.bin") << "model";
  const std::string good = issue_certificate(dir.path, "good", "keyUsage=critical,digitalSignature\nextendedKeyUsage=codeSigning\n");
  struct Case {
    const char* name;
    const char* ext;
    const char* refusal;  // empty: may sign
  };
  for (const Case& c : {Case{"encipher", "keyUsage=critical,keyEncipherment\nextendedKeyUsage=codeSigning\n",
                             "its key usage does not include digitalSignature"},
                        Case{"email", "keyUsage=critical,digitalSignature\nextendedKeyUsage=emailProtection\n",
                             "its extended key usage does not include codeSigning"},
                        Case{"no_usage", "", ""}, Case{"key_usage_only", "keyUsage=critical,digitalSignature\n", ""},
                        Case{"code_signing_only", "extendedKeyUsage=codeSigning\n", ""},
                        Case{"any_eku", "keyUsage=digitalSignature\nextendedKeyUsage=anyExtendedKeyUsage\n", ""}}) {
    INFO(c.name);
    const std::string pem = issue_certificate(dir.path, c.name, c.ext);
    if (*c.refusal == '\0') {
      CHECK_NOTHROW(sign_model(certificate_request(dir.path, pem)));
      continue;
    }
    error_of([&] { sign_model(certificate_request(dir.path, pem)); }, ErrorKind::Usage, c.refusal);
    // A signature made with an allowed certificate, the refused one (for the same key) swapped in:
    // the certificates are outside what is signed, and verify refuses it for its usage.
    nlohmann::json bundle = nlohmann::json::parse(sign_model(certificate_request(dir.path, good)).bundle);
    const std::string der = certificates_from_pem(slurp(pem), pem).front().der();
    bundle["verificationMaterial"]["x509CertificateChain"]["certificates"][0]["rawBytes"] = base64_encode(der);
    SignatureTrust trust;
    trust.root_files = {(dir.path / "ca.pem").string()};
    trust.root_pems = {slurp(trust.root_files.front())};
    error_of([&] { check_model_signature((dir.path / "m.bin").string(), "m.bin.sig", bundle.dump(), trust, {}); },
             ErrorKind::SignatureInvalid, std::string("may not sign: ") + c.refusal);
  }
}

namespace {

VerifyResult verify_path(const std::string& path) {
  VerifySettings settings;
  settings.model = path;
  settings.threads = 1;
  return verify_model(settings, [](const std::string&) {});
}
}  // namespace

TEST_CASE("verify: a legacy torch.save file cut inside its storages, or with bytes after them, is damaged (exit 3)") {
  // scripts/make_testdata_pickle_shapes.py (review 55c): the whole file loads; cut 1,000 bytes short,
  // torch.load says "unexpected EOF, expected 1000 more bytes".
  const VerifyResult cut = verify_path(testdata("pickle_shapes/legacy_cut_in_data.pth"));
  CHECK(cut.kind == FileKind::LegacyTorchSave);
  CHECK(cut.exit_code == 3);
  REQUIRE(cut.problems.size() == 1);
  CHECK_THAT(cut.problems.front(), Catch::StartsWith("truncated: storage '") && Catch::Contains("the file ends at"));
  REQUIRE(cut.findings.size() == 1);
  CHECK_THAT(cut.findings.front().what(), Catch::Contains("damaged"));
  const InspectReport inspected = inspect_file(testdata("pickle_shapes/legacy_cut_in_data.pth"));
  REQUIRE(inspected.problems.size() == 1);
  CHECK(inspected.problems.front() == cut.problems.front());

  const VerifyResult trailing = verify_path(testdata("pickle_shapes/legacy_trailing.pth"));
  CHECK(trailing.exit_code == 3);
  REQUIRE(trailing.problems.size() == 1);
  CHECK_THAT(trailing.problems.front(), Catch::StartsWith("90 bytes follow the last storage"));

  // Cut inside its pickles: damaged too, not crafted.
  const VerifyResult in_pickle = verify_path(testdata("pickle_shapes/legacy_cut_in_pickle.pth"));
  CHECK_FALSE(in_pickle.unsafe);
  CHECK(in_pickle.exit_code == 3);
  REQUIRE_FALSE(in_pickle.problems.empty());
  CHECK_THAT(in_pickle.problems.front(), Catch::Contains("cut short"));

  // Whole legacy files of PyTorch 1.13 and 2.13 pass.
  for (const char* whole : {"legacy_state_dict.pth", "pickle_shapes/ordereddict_pairs.pth",
                            "loadsafety/benign/torch1_13/legacy.pth", "loadsafety/benign/torch2_13/legacy.pth"}) {
    const VerifyResult r = verify_path(testdata(whole));
    INFO(whole << ": " << (r.problems.empty() ? std::string() : r.problems.front()));
    CHECK(r.exit_code == 0);
  }
}

TEST_CASE("verify --key: a signed file that is damaged is damaged (exit 3): the signature vouches for who, not for whole") {
  TempDir dir;
  if (!make_key(dir.path)) {
    WARN("no openssl command: skipped");
    return;
  }
  for (const char* rel : {"pickle_shapes/legacy_cut_in_data.pth", "pickle_shapes/legacy_trailing.pth",
                          "pickle_shapes/legacy_cut_in_pickle.pth", "pickle_shapes/pickle_cut.pkl"}) {
    INFO(rel);
    const std::string path = (dir.path / std::filesystem::path(rel).filename()).string();
    std::filesystem::copy_file(testdata(rel), path);
    // sign refuses it as verify does (exit 3); signed anyway, verify still finds the damage.
    const CliResult refused = run_cli({"sign", path, "--key", (dir.path / "k.key").string()});
    CHECK(refused.code == 3);
    CHECK_THAT(refused.err, Catch::Contains("will not sign it: it is damaged") && Catch::Contains("--allow-unverified"));
    CHECK_FALSE(std::filesystem::exists(path + ".sig"));
    REQUIRE(run_cli({"sign", path, "--key", (dir.path / "k.key").string(), "--allow-unverified"}).code == 0);
    const CliResult r = run_cli({"verify", path, "--key", (dir.path / "k.pub").string()});
    CHECK(r.code == 3);
    CHECK_THAT(r.out + r.err, Catch::Contains("damaged"));
  }
  // A whole one passes.
  const std::string whole = (dir.path / "whole.pth").string();
  std::filesystem::copy_file(testdata("loadsafety/benign/torch2_13/legacy.pth"), whole);
  REQUIRE(run_cli({"sign", whole, "--key", (dir.path / "k.key").string()}).code == 0);
  CHECK(run_cli({"verify", whole, "--key", (dir.path / "k.pub").string()}).code == 0);
}

TEST_CASE("sign checks each model file as verify does before vouching for it") {
  TempDir dir;
  if (!make_key(dir.path)) {
    WARN("no openssl command: skipped");
    return;
  }
  const std::string key = (dir.path / "k.key").string();
  // Changed since it was stamped: exit 1, naming the record.
  const std::string stamped = (dir.path / "stamped.pt").string();
  std::filesystem::copy_file(testdata("mlp_scripted.pt"), stamped);
  REQUIRE(run_cli({"stamp", "-q", "--keep-bytes", "--in-place", "--no-git", "--no-host", stamped}).code == 0);
  CHECK(run_cli({"sign", stamped, "--key", key, "-o", stamped + ".first.sig"}).code == 0);
  const TorchArchive original(open_file_source(stamped));
  std::string changed = original.read(*original.find("data/0"), 1 << 20);
  changed[0] ^= 1;
  const std::string edited = (dir.path / "edited.pt").string();
  std::ofstream(edited, std::ios::binary) << archive_with_record(stamped, "data/0", changed);
  const CliResult r = run_cli({"sign", edited, "--key", key});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("will not sign it: it changed since it was stamped: '") &&
                        Catch::Contains("data/0' changed"));
  CHECK_FALSE(std::filesystem::exists(edited + ".sig"));
  CHECK(run_cli({"sign", edited, "--key", key, "--embed"}).code == 1);

  // A crafted archive in a directory: nothing written; the directory without it is signed,
  // its other files (a config, an ONNX model) signed as bytes.
  const std::filesystem::path model = dir.path / "model";
  std::filesystem::create_directory(model);
  std::filesystem::copy_file(testdata("state_dict.pth"), model / "weights.pth");
  std::ofstream(model / "config.json") << "{}";
  std::filesystem::copy_file(testdata("hostile/duplicate_names.pt"), model / "crafted.pt");
  const CliResult dir_refused = run_cli({"sign", model.string(), "--key", key});
  CHECK(dir_refused.code == 8);
  CHECK_THAT(dir_refused.err, Catch::Contains("crafted.pt") && Catch::Contains("crafted:"));
  CHECK_FALSE(std::filesystem::exists(model / "model.sig"));
  std::filesystem::remove(model / "crafted.pt");
  std::filesystem::copy_file(testdata("model.onnx"), model / "model.onnx");
  CHECK(run_cli({"sign", model.string(), "--key", key}).code == 0);
  CHECK(std::filesystem::exists(model / "model.sig"));
}

// How many of this process's descriptors are open on `path`'s inode.
int descriptors_open_on(const std::filesystem::path& path) {
  struct stat want {};
  if (::stat(path.c_str(), &want) != 0) return 0;
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) == 0 && st.st_dev == want.st_dev && st.st_ino == want.st_ino) ++count;
  }
  return count;
}

TEST_CASE("sign DIR: a model file swapped in the folder between its hash and its check is refused") {
  // The folder's owner makes sign hash a crafted file and then check a good
  // one put at its path: the digest signed would be the crafted file's. Here
  // a read lock the check waits for holds it between the two (an editor's
  // write lock, taken by the test), and the swap happens there.
  TempDir dir;
  if (!make_key(dir.path)) {
    WARN("no openssl command: skipped");
    return;
  }
  const std::filesystem::path model = dir.path / "model";
  std::filesystem::create_directory(model);
  const std::filesystem::path weights = model / "weights.pt";
  std::filesystem::copy_file(testdata("hostile/duplicate_names.pt"), weights);
  std::filesystem::copy_file(testdata("mlp_scripted.pt"), dir.path / "good.pt");
  Fd lock_fd(::open(weights.c_str(), O_RDWR | O_CLOEXEC));
  REQUIRE(lock_fd.get() >= 0);
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_len = 1;
  REQUIRE(::fcntl(lock_fd.get(), F_OFD_SETLK, &lock) == 0);

  CliResult r{};
  std::thread signing([&] { r = run_cli({"sign", model.string(), "--key", (dir.path / "k.key").string()}); });
  // The lock's descriptor, the hash's and the check's waiting for the lock.
  for (int i = 0; i < 2000 && descriptors_open_on(weights) < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(descriptors_open_on(weights) >= 3);
  std::filesystem::rename(dir.path / "good.pt", weights);
  lock_fd = Fd();
  signing.join();
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("weights.pt") && Catch::Contains("it was replaced while the folder was being signed"));
  CHECK_FALSE(std::filesystem::exists(model / "model.sig"));
  // Nothing swapped: the good file is signed.
  CHECK(run_cli({"sign", model.string(), "--key", (dir.path / "k.key").string()}).code == 0);
}

TEST_CASE("verify: a plain pickle cut short is damaged (exit 3), not crafted (8)") {
  const VerifyResult r = verify_path(testdata("pickle_shapes/pickle_cut.pkl"));
  CHECK(r.kind == FileKind::Pickle);
  CHECK_FALSE(r.unsafe);
  CHECK(r.exit_code == 3);
  const CliResult cli = run_cli({"verify", testdata("pickle_shapes/pickle_cut.pkl")});
  CHECK(cli.code == 3);
  CHECK_THAT(cli.out.substr(0, cli.out.find('\n')), Catch::Contains(": DAMAGED"));
}

TEST_CASE("verify: a TorchScript archive of a dtype the linked libtorch lacks is unreadable, not damaged") {
  // jit_new_dtypes_2_13.pt: torch.jit.save of uint16 and float8_e5m2fnuz buffers. libtorch 1.13 (18 scalar
  // types) refuses torch.UInt16Storage as an unknown global; 2.13 (46) loads it.
  const auto archive = open_torchscript_archive(open_file_source(testdata("pickle_shapes/jit_new_dtypes_2_13.pt")),
                                                "test");
  VerifyOptions options;
  options.threads = 1;
  options.readable = ReadableVersions{"1.13.1", 1, 10, 4, 9, 18};
  const VerifyReport old = verify_archive(*archive, options);
  CHECK(old.problems.empty());
  CHECK(old.outcome() == VerifyOutcome::Unreadable);
  REQUIRE(old.unreadable.size() == 1);
  CHECK_THAT(old.unreadable.front(), Catch::StartsWith("written by a newer PyTorch") && Catch::Contains("uint16") &&
                                         Catch::Contains("libtorch 1.13.1"));
  options.readable = ReadableVersions{"2.13.0", 1, 10, 4, 9, 46};
  CHECK(verify_archive(*archive, options).outcome() == VerifyOutcome::Intact);
  // verify judges against the libtorch this tsarchive links.
  const VerifyResult r = verify_path(testdata("pickle_shapes/jit_new_dtypes_2_13.pt"));
  if (built_libtorch_versions().scalar_types > 27) {
    CHECK(r.exit_code == 0);
  } else {
    CHECK(r.exit_code == 3);
    REQUIRE(r.findings.size() == 1);
    CHECK(r.findings.front().hint() == newer_libtorch_hint());
  }
}

TEST_CASE("verify DIR: files that are no model are skipped with the reason; one named like a model fails") {
  TempDir dir;
  std::filesystem::copy_file(testdata("state_dict.pth"), dir.path / "weights.pth");
  std::filesystem::copy_file(testdata("model.onnx"), dir.path / "model.onnx");
  std::ofstream(dir.path / "config.json") << "{\"hidden_size\": 8}\n";
  std::ofstream(dir.path / "hparams.yaml") << "lr: 0.1\n";
  std::ofstream(dir.path / "empty.txt");
  const CliResult ok = run_cli({"verify", dir.path.string()});
  INFO(ok.out << ok.err);
  CHECK(ok.code == 0);
  CHECK_THAT(ok.out, Catch::Contains("config.json: skipped: not a ZIP, a pickle or a torch.save file"));
  CHECK_THAT(ok.out, Catch::Contains("model.onnx: skipped: an ONNX model"));
  CHECK_THAT(ok.out, Catch::Contains("5 files: 1 ok, 4 skipped (not a model)"));
  const CliResult as_json = run_cli({"verify", "--json", dir.path.string()});
  const std::string lines = as_json.out.substr(0, as_json.out.find_last_not_of('\n') + 1);
  const auto summary = nlohmann::json::parse(lines.substr(lines.rfind('\n') + 1));
  CHECK(summary["skipped"] == 4);
  CHECK(summary["exit_code"] == 0);

  std::ofstream(dir.path / "broken.pt") << "not a model\n";
  const CliResult failed = run_cli({"verify", dir.path.string()});
  CHECK(failed.code == 3);
  CHECK_THAT(failed.out, Catch::Contains("broken.pt: failed (exit 3): "));
  // Named on the command line, a text file is verified as given.
  CHECK(run_cli({"verify", (dir.path / "config.json").string(), (dir.path / "weights.pth").string()}).code == 3);
}
