#include "core/provenance/signing.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <exception>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "base/error.h"
#include "base/file_state.h"
#include "base/posix_fd.h"
#include "base/strings.h"
#include "core/provenance/digest.h"
#include "core/provenance/signing_crypto.h"
#include "core/provenance/sigstore_keyless.h"
#include "core/provenance/sigstore_trust_root.h"
#include "format/byte_source.h"

namespace tsarchive {
namespace {

namespace fs = std::filesystem;

constexpr char kFewerFilesHint[] = "sign fewer files in one signature: leave some out with --ignore-paths, or sign "
                                   "sub-folders apart";

// Whether the relative path `name` is `ignored` or lies under it (by components).
bool under(const std::string& name, const std::string& ignored) {
  if (ignored.empty() || ignored == ".") return false;
  std::string prefix = ignored;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return name == prefix || (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
                            name[prefix.size()] == '/');
}

bool ignored(const std::string& name, const std::vector<std::string>& ignore) {
  return std::any_of(ignore.begin(), ignore.end(), [&](const std::string& p) { return under(name, p); });
}

struct FileToHash {
  std::string name;  // relative
  std::string path;  // to open
  uint64_t size = 0;
  std::string not_a_file = {};  // why it is not hashed ("a symbolic link"), when `differs` found one
};

// What in a directory cannot be signed as a file: a symbolic link not
// allowed, a link to something that is not a regular file, a pipe, socket or
// device. Sign refuses it (Error(Usage)); verify, with `differs`, lists it
// unhashed: the model changed, and verify says so, naming it.
void refuse_or_list(const std::string& model, const std::string& name, const std::string& why, const char* hint,
                    bool differs, std::vector<FileToHash>& out) {
  if (!differs) throw Error(ErrorKind::Usage, "'" + name + "' is " + why, model, hint);
  out.push_back(FileToHash{name, {}, 0, why});
}

// The entry `name` whose status the system would not give: an I/O error that
// names it and the system's reason. Taken for "not found", a path past
// PATH_MAX was called a pipe, socket or device (review 57b, F6).
[[noreturn]] void throw_unreadable_entry(const std::string& model, const std::string& name, const std::error_code& ec) {
  const std::string shown =
      name.size() > 200 ? name.substr(0, 200) + "... (" + std::to_string(name.size()) + " bytes)" : name;
  throw_io("cannot read '" + shown + "': " + ec.message(), model,
           ec == std::errc::filename_too_long ? "sign a folder further down, or leave it out with --ignore-paths"
                                              : "check its permissions, or leave it out with --ignore-paths");
}

// A link's target that is missing or a loop is no regular file, which
// refuse_or_list says; any other error is the system's.
bool target_missing(const std::error_code& ec) {
  return ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory ||
         ec == std::errc::too_many_symbolic_link_levels;
}

std::vector<FileToHash> list_directory(const std::string& model, const std::vector<std::string>& ignore,
                                       bool allow_symlinks, bool differs) {
  std::vector<FileToHash> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(model, fs::directory_options::none, ec), end;
  if (ec) throw_io("cannot read the directory: " + ec.message(), model);
  for (; it != end; it.increment(ec)) {
    if (ec) throw_io("cannot read the directory: " + ec.message(), model);
    const fs::path& path = it->path();
    const std::string name = path.lexically_relative(model).generic_string();
    if (ignored(name, ignore)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) it.disable_recursion_pending();
      continue;
    }
    const fs::file_status link = it->symlink_status(ec);
    if (ec) throw_unreadable_entry(model, name, ec);
    if (fs::is_symlink(link)) {
      if (!allow_symlinks) {
        refuse_or_list(model, name, "a symbolic link", "sign what it points to, or pass --allow-symlinks to hash its target",
                       differs, out);
        continue;
      }
      const fs::file_status target = fs::status(path, ec);
      if (ec && !target_missing(ec)) throw_unreadable_entry(model, name, ec);
      if (!fs::is_regular_file(target)) {
        refuse_or_list(model, name, "a symbolic link to something that is not a regular file",
                       "leave it out with --ignore-paths", differs, out);
        continue;
      }
    } else if (fs::is_directory(link)) {
      continue;
    } else if (!fs::is_regular_file(link)) {
      refuse_or_list(model, name, "not a regular file (a pipe, socket or device)", "leave it out with --ignore-paths",
                     differs, out);
      continue;
    }
    const uintmax_t size = fs::file_size(path, ec);
    out.push_back(FileToHash{name, path.string(), ec ? 0 : static_cast<uint64_t>(size), {}});
  }
  return out;
}

// The SHA-256 of the file at `path`, with options.check_opened (when set)
// run beside the hash on the same descriptor. The file was a regular file
// (or an allowed link to one) when the folder was listed; what its path
// holds by the time it is opened is taken as it is then: a pipe is not
// waited on (O_NONBLOCK), a link not allowed is not followed, and a file
// written while it is read is refused (its FileState before and after), so
// the digest is that of one version of the file, the one checked.
std::string hash_file(const std::string& path, const ModelFilesOptions& options) {
  // As list_directory refuses such a file (sign, exit 2) or finds it a
  // difference (verify, exit 1).
  const auto changed = [&](const std::string& what) {
    return Error(options.not_files_differ ? ErrorKind::CheckFailed : ErrorKind::Usage,
                 what + " after the folder was listed", path, "run again when nothing changes the folder");
  };
  const int no_follow = options.allow_symlinks ? 0 : O_NOFOLLOW;
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | no_follow));
  if (fd.get() < 0 && errno == ELOOP && no_follow != 0) throw changed("it became a symbolic link");
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) throw_io("cannot open: " + errno_text(), path);
  if (!S_ISREG(st.st_mode)) throw changed("it became something other than a regular file");
#ifdef POSIX_FADV_SEQUENTIAL
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
  // The size read is the settled state's: a file that grew while it settled is read whole.
  const FileState before = settled_file_state(fd.get(), path, ErrorKind::CheckFailed, &st);
  const int raw = fd.get();
  const std::unique_ptr<ByteSource> source = make_fd_source(fd.release(), static_cast<uint64_t>(st.st_size), path);
  std::string digest;
  if (!options.check_opened) {
    digest = sha256_source_hex(*source);
  } else {
    const std::pair<uint64_t, uint64_t> identity{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
    std::future<void> checked =
        std::async(std::launch::async, [&] { options.check_opened(path, *source, identity); });
    try {
      digest = sha256_source_hex(*source);
    } catch (...) {
      checked.wait();
      throw;
    }
    checked.get();
  }
  FileState after;
  if (!current_file_state(raw, after) || after != before) {
    throw Error(ErrorKind::CheckFailed, "it was written while it was being read", path,
                "run again when nothing writes it");
  }
  return digest;
}

// SHA-256 of every file, largest first on one thread per core.
std::vector<SignedFile> hash_all(std::vector<FileToHash> files, const ModelFilesOptions& options, unsigned threads) {
  std::stable_sort(files.begin(), files.end(), [](const FileToHash& a, const FileToHash& b) { return a.size > b.size; });
  std::vector<SignedFile> out(files.size());
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < files.size();) {
      try {
        // No digest for what is no file: it never matches a signed one.
        out[i] = SignedFile{files[i].name, files[i].not_a_file.empty() ? hash_file(files[i].path, options) : std::string(),
                            files[i].not_a_file};
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next = files.size();
      }
    }
  };
  const unsigned cores = threads != 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  const auto count = static_cast<unsigned>(std::min<size_t>(cores, std::max<size_t>(files.size(), 1)));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < count; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  sort_signed_files(out);
  return out;
}

std::string model_name_of(const std::string& model) {
  fs::path path = fs::path(model).lexically_normal();
  std::string name = path.filename().string();
  if (name.empty() || name == "." || name == "..") name = fs::absolute(path).lexically_normal().filename().string();
  if (name.empty()) name = fs::weakly_canonical(path).filename().string();
  return name;
}

// The name a directory's signature file is left out under: its own name,
// lexically (path_inside_model), and only while that name is the file read; a
// '..' through a linked folder can make them differ, and then nothing is left
// out. A signature file that is a symbolic link is refused unless links are
// allowed, as model_signing refuses it: a link model.sig -> config.json would
// make a file the loader reads double as the signature. Nothing when the
// signature is not inside the model.
std::optional<std::string> signature_name_in_model(const std::string& model, const std::string& signature_path,
                                                   bool allow_symlinks, ErrorKind refuse_as) {
  std::optional<std::string> name = path_inside_model(model, signature_path);
  if (!name) return std::nullopt;
  const std::string at_name = (fs::path(model) / *name).string();
  struct stat link {};
  if (::lstat(at_name.c_str(), &link) != 0) return name;  // not written yet: sign is about to
  if (S_ISLNK(link.st_mode) && !allow_symlinks) {
    throw Error(refuse_as, "the signature file '" + *name + "' inside the model is a symbolic link", signature_path,
                "give the signature file itself: a link could stand for a file the model's loader reads");
  }
  struct stat named {}, read {};
  if (::stat(at_name.c_str(), &named) != 0 || ::stat(signature_path.c_str(), &read) != 0 ||
      named.st_dev != read.st_dev || named.st_ino != read.st_ino) {
    return std::nullopt;
  }
  return name;
}

// The paths a signature of `model` leaves out and records: those given, the
// signature file when inside, and git's (model_signing's defaults).
std::vector<std::string> ignore_list(const std::string& model, const std::string& signature_path,
                                     const ModelFilesOptions& options) {
  std::vector<std::string> out = options.ignore_paths;
  if (is_directory(model)) {
    if (auto inside = signature_name_in_model(model, signature_path, options.allow_symlinks, ErrorKind::Usage)) {
      out.push_back(*inside);
    }
  }
  if (options.ignore_git_paths) out.insert(out.end(), kGitPaths.begin(), kGitPaths.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The certificate method: the signer's certificate chains to the roots in
// `trust` and may sign; its key, with subject and issuer put into `check`.
PublicKey trusted_certificate_key(const ModelBundle& bundle, const SignatureTrust& trust,
                                  const std::string& signature_path, SignatureCheck& check) {
  check.method = "certificate";
  if (bundle.certificates.empty()) {
    throw_signature_invalid("the signature was made with a key, not a certificate", signature_path,
                            "verify it with --key PUBLIC.pem");
  }
  std::vector<Certificate> roots;
  for (size_t i = 0; i < trust.root_pems.size(); ++i) {
    for (Certificate& c : certificates_from_pem(trust.root_pems[i], trust.root_files[i])) roots.push_back(std::move(c));
  }
  std::vector<Certificate> chain;
  try {
    for (const std::string& der : bundle.certificates) chain.push_back(Certificate::from_der(der));
  } catch (const Error& e) {
    throw e.with_file(signature_path);
  }
  const Certificate& leaf = chain.front();
  check.subject = leaf.subject();
  check.issuer = leaf.issuer();
  const std::vector<Certificate> intermediates(chain.begin() + 1, chain.end());
  if (const std::string why = chain_problem(leaf, intermediates, roots); !why.empty()) {
    throw_signature_invalid("the signer's certificate (" + check.subject.substr(0, 200) + ") is not trusted: " + why,
                            signature_path, "check --certificate-chain names the root that issued it");
  }
  if (const std::string why = leaf.signing_usage_problem(); !why.empty()) {
    throw_signature_invalid("the signer's certificate (" + check.subject.substr(0, 200) + ") may not sign: " + why,
                            signature_path);
  }
  try {
    return leaf.public_key();
  } catch (const Error& e) {
    throw e.with_file(signature_path);
  }
}

// The keyless method: the bundle's certificate and log entries checked
// against the trust root and the identity and issuer in `trust`.
PublicKey keyless_signer(const ModelBundle& bundle, const SignatureTrust& trust, const std::string& signature_path,
                         SignatureCheck& check) {
  check.method = "keyless";
  SigstoreTrustRoot root;
  try {
    root = parse_trust_root(trust.trust_root_json);
  } catch (const Error& e) {
    throw e.with_file(trust.trust_root_file);
  }
  if (!bundle.keyless()) {
    throw_signature_invalid("the signature has no transparency-log entry: it was not made with Sigstore keyless signing",
                            signature_path, "verify it with --key or --certificate-chain");
  }
  try {
    const KeylessCheck keyless = check_keyless_bundle(bundle, root, KeylessPolicy{trust.identity, trust.oidc_issuer});
    check.subject = keyless.identity;
    check.issuer = keyless.issuer;
    check.transparency = keyless.log + " entry " + std::to_string(keyless.log_index) + " at " +
                         format_utc(keyless.integrated_time) + " (" +
                         (keyless.set_verified ? std::string("signed entry timestamp") : std::string()) +
                         (keyless.set_verified && keyless.inclusion_verified ? ", " : "") +
                         (keyless.inclusion_verified ? "inclusion proof" : "") + ")";
  } catch (const Error& e) {
    throw e.with_file(signature_path);
  }
  // check_keyless_bundle has verified the DSSE signature with this key.
  return Certificate::from_der(bundle.certificates.front()).public_key();
}

}  // namespace

std::string read_signing_file(const std::string& path, const char* what) {
  // O_NONBLOCK: a FIFO without a writer is refused below, not waited on.
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    const bool missing = errno == ENOENT;
    throw_io(std::string("cannot open ") + what + ": " + errno_text(), path,
             missing ? "check the path" : "check the file's permissions");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    throw_io(std::string(what) + " is not a regular file", path, "give the path of a file");
  }
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  if (static_cast<uint64_t>(st.st_size) > kMaxBundleBytes) {
    throw_signature_invalid(std::string(what) + " is larger than 64 MiB", path);
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd.get(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_io(std::string("cannot read ") + what + ": " + errno_text(), path);
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

std::optional<std::string> path_inside_model(const std::string& model, const std::string& path) {
  // Lexically, never through a link: a signature file that is a link to
  // config.json stands for the name model.sig, and leaving out its target
  // would leave config.json unchecked.
  std::error_code ec;
  const fs::path root = fs::absolute(model, ec).lexically_normal();
  if (ec) return std::nullopt;
  const fs::path target = fs::absolute(path, ec).lexically_normal();
  if (ec) return std::nullopt;
  std::string text = target.lexically_relative(root).generic_string();
  while (text.size() > 1 && text.back() == '/') text.pop_back();
  if (text.empty() || text == "." || text == ".." || text.rfind("../", 0) == 0) return std::nullopt;
  return text;
}

std::vector<std::string> ignore_paths_in_model(const std::string& model, const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0) {
      if (auto inside = path_inside_model(model, p)) {
        out.push_back(*inside);
        continue;
      }
    }
    std::string relative = p;
    while (starts_with(relative, "./")) relative.erase(0, 2);
    // "sub/" names the folder "sub", as for model_signing (pathlib drops the slash) and under().
    while (relative.size() > 1 && relative.back() == '/') relative.pop_back();
    if (!signed_name_problem(relative).empty() || relative == ".") {
      throw_usage("--ignore-paths " + p.substr(0, 200) + " is not a path inside the model",
                  "give paths relative to the model directory, e.g. --ignore-paths README.md");
    }
    out.push_back(relative);
  }
  return out;
}

std::string default_signature_path(const std::string& model) {
  if (is_directory(model)) return (fs::path(model) / "model.sig").string();
  std::string path = model;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path + ".sig";
}

std::vector<SignedFile> hash_model_files(const std::string& model, const ModelFilesOptions& options) {
  if (options.opened != nullptr) return {SignedFile{".", sha256_source_hex(*options.opened)}};
  struct stat st {};
  if (::lstat(model.c_str(), &st) != 0) throw_io("cannot read the model: " + errno_text(), model);
  if (S_ISLNK(st.st_mode)) {
    if (!options.allow_symlinks) {
      throw Error(ErrorKind::Usage, "the model is a symbolic link", model,
                  "name what it points to, or pass --allow-symlinks");
    }
    if (::stat(model.c_str(), &st) != 0) throw_io("cannot read the model: " + errno_text(), model);
  }
  if (S_ISREG(st.st_mode)) {
    return hash_all({FileToHash{".", model, static_cast<uint64_t>(st.st_size)}}, options, 1);
  }
  if (!S_ISDIR(st.st_mode)) throw Error(ErrorKind::Usage, "the model is neither a file nor a directory", model);
  std::vector<FileToHash> files =
      list_directory(model, options.ignore_paths, options.allow_symlinks, options.not_files_differ);
  if (options.check_listing) {
    std::vector<std::string> names;
    names.reserve(files.size());
    for (const FileToHash& f : files) names.push_back(f.name);
    options.check_listing(names);
  }
  return hash_all(std::move(files), options, options.threads);
}

SignerKeys read_signer_keys(const std::string& key_file, const std::string& password_file,
                            const std::string& certificate_file, const std::vector<std::string>& chain_files) {
  SignerKeys keys;
  keys.private_key_file = key_file;
  keys.private_key_pem = read_signing_file(key_file, "the private key");
  if (!password_file.empty()) {
    std::string password = read_signing_file(password_file, "the password file");
    if (const size_t eol = password.find_first_of("\r\n"); eol != std::string::npos) password.resize(eol);
    keys.password = std::move(password);
  }
  if (!certificate_file.empty()) {
    keys.certificate_file = certificate_file;
    keys.certificate_pem = read_signing_file(certificate_file, "the certificate");
    for (const std::string& file : chain_files) {
      keys.chain_files.push_back(file);
      keys.chain_pems.push_back(read_signing_file(file, "the certificate chain"));
    }
  }
  // Parsed now: a wrong key or password fails before any model is read.
  (void)PrivateKey::from_pem(keys.private_key_pem, keys.private_key_file, keys.password);
  return keys;
}

SignResult sign_statement(ModelStatement statement, const SignerKeys& keys) {
  const PrivateKey key = PrivateKey::from_pem(keys.private_key_pem, keys.private_key_file, keys.password);
  ModelBundle bundle;
  SignResult result;
  if (keys.certificate_pem.empty()) {
    result.signer = "key sha256:" + key.public_key().fingerprint();
  } else {
    const std::vector<Certificate> leaf = certificates_from_pem(keys.certificate_pem, keys.certificate_file);
    // The signer's own certificate: one sign cannot use is a usage error (exit 2), as a key of another kind is.
    const PublicKey certified = [&] {
      try {
        return leaf.front().public_key();
      } catch (const Error& e) {
        throw Error(ErrorKind::Usage, e.what(), keys.certificate_file, "give the certificate issued for --key");
      }
    }();
    if (!certified.same_key(key.public_key())) {
      throw Error(ErrorKind::Usage, "the certificate is not for this private key", keys.certificate_file,
                  "give the certificate issued for --key");
    }
    // model_signing and verify check the certificate at the time they run: a
    // signature made outside its validity never verifies.
    const auto [not_before, not_after] = leaf.front().validity();
    const int64_t now = static_cast<int64_t>(std::time(nullptr));
    if (now < not_before || now > not_after) {
      throw Error(ErrorKind::Usage,
                  std::string("the certificate ") + (now > not_after ? "has expired" : "is not valid yet") +
                      " (valid " + format_utc(not_before) + " to " + format_utc(not_after) + ")",
                  keys.certificate_file, "a signature made with it would not verify; give a certificate valid now");
    }
    // Verifiers refuse a certificate whose usages do not allow signing code: so does sign.
    if (const std::string why = leaf.front().signing_usage_problem(); !why.empty()) {
      throw Error(ErrorKind::Usage, "the certificate may not sign: " + why, keys.certificate_file,
                  "a signature made with it would not verify; give a certificate for digitalSignature and codeSigning");
    }
    bundle.certificates.push_back(leaf.front().der());
    for (size_t i = 0; i < keys.chain_pems.size(); ++i) {
      for (const Certificate& c : certificates_from_pem(keys.chain_pems[i], keys.chain_files[i])) {
        bundle.certificates.push_back(c.der());
      }
    }
    result.signer = leaf.front().subject();
  }
  statement.root_sha256 = files_root_digest(statement.files);
  result.statement = std::move(statement);
  bundle.payload = statement_json(result.statement);
  bundle.signature = key.sign(dsse_pae(bundle.payload));
  bundle.has_public_key = bundle.certificates.empty();
  if (bundle.has_public_key) bundle.key_hint = key.public_key().fingerprint();
  result.bundle = bundle_json(bundle);
  // What sign writes, its own verify reads (review 57b, F5); sign_model has
  // refused a directory too large before hashing it.
  if (const std::string why = signature_size_problem(result.bundle.size(), bundle.payload); !why.empty()) {
    throw Error(ErrorKind::Usage, why, "", kFewerFilesHint);
  }
  return result;
}

namespace {

// A signature of the files `names` is refused before any is hashed when
// verify would not read it: a digest's length is fixed, so the statement with
// placeholder digests is as long as the one sign would write. The bundle
// around it: the statement in base64, the certificates (no longer than their
// PEM text) and under 1 KiB of members.
void refuse_signature_too_large(ModelStatement statement, const std::vector<std::string>& names,
                                const SignerKeys& keys, const std::string& model) {
  if (names.size() > kMaxStatementValues / kStatementValuesPerFile) {
    throw Error(ErrorKind::Usage,
                std::to_string(names.size()) + " files to sign, more than a signature verify reads can list (" +
                    std::to_string(kMaxStatementValues) + " JSON values, " + std::to_string(kStatementValuesPerFile) +
                    " a file: some " + with_commas(kMaxStatementValues / kStatementValuesPerFile / 1000 * 1000) +
                    " files)",
                model, kFewerFilesHint);
  }
  statement.files.reserve(names.size());
  for (const std::string& name : names) statement.files.push_back(SignedFile{name, std::string(64, '0')});
  const std::string payload = statement_json(statement);
  uint64_t bundle = (payload.size() + 2) / 3 * 4 + keys.certificate_pem.size() + 1024;
  for (const std::string& pem : keys.chain_pems) bundle += pem.size();
  if (const std::string why = signature_size_problem(bundle, payload); !why.empty()) {
    throw Error(ErrorKind::Usage, why, model, kFewerFilesHint);
  }
}

}  // namespace

SignResult sign_model(const SignRequest& request) {
  // The key first: a wrong key or password fails before the model is read.
  (void)PrivateKey::from_pem(request.keys.private_key_pem, request.keys.private_key_file, request.keys.password);
  ModelFilesOptions files = request.files;
  const std::vector<std::string> ignore = ignore_list(request.model, request.signature_path, files);
  files.ignore_paths = ignore;
  files.ignore_git_paths = false;  // already in the list
  ModelStatement statement;
  statement.model_name = model_name_of(request.model);
  statement.ignore_paths = ignore;
  statement.allow_symlinks = request.files.allow_symlinks;
  files.check_listing = [&](const std::vector<std::string>& names) {
    refuse_signature_too_large(statement, names, request.keys, request.model);
  };
  statement.files = hash_model_files(request.model, files);
  return sign_statement(std::move(statement), request.keys);
}

std::string signer_text(const SignatureCheck& c) {
  if (c.method == "key") return "key sha256:" + c.key_fingerprint + " (" + c.curve + ")";
  if (c.method == "keyless") return c.subject + ", issued by " + c.issuer + " (Sigstore keyless, " + c.curve + ")";
  return c.subject + ", issued by " + c.issuer + " (key sha256:" + c.key_fingerprint.substr(0, 16) + "..., " + c.curve +
         ")";
}

SignatureCheck check_signature_bundle(const std::string& signature_path, const std::string& bundle_text,
                                      const SignatureTrust& trust) {
  SignatureCheck check;
  check.signature_path = signature_path;
  ModelBundle bundle;
  try {
    bundle = parse_bundle(bundle_text, !trust.trust_root_json.empty());
  } catch (const Error& e) {
    throw e.with_file(signature_path);
  }

  std::optional<PublicKey> signer;
  if (!trust.public_key_pem.empty()) {
    check.method = "key";
    const PublicKey key = PublicKey::from_pem(trust.public_key_pem, trust.public_key_file);
    if (!bundle.has_public_key) {
      throw_signature_invalid("the signature was made with a certificate, not a key", signature_path,
                              "verify it with --certificate-chain ROOTS.pem");
    }
    if (!bundle.key_hint.empty() && bundle.key_hint != key.fingerprint()) {
      throw_signature_invalid("signed with another key (sha256:" + bundle.key_hint.substr(0, 64) + ")", signature_path,
                              "this model was not signed by the key given");
    }
    signer = key;
  } else if (!trust.trust_root_json.empty()) {
    signer = keyless_signer(bundle, trust, signature_path, check);
  } else {
    signer = trusted_certificate_key(bundle, trust, signature_path, check);
  }
  check.key_fingerprint = signer->fingerprint();
  check.curve = signer->curve();

  if (!signer->verifies(dsse_pae(bundle.payload), bundle.signature)) {
    const std::string v02 = dsse_pae_v02(bundle.payload);
    if (signer->verifies(v02, bundle.signature) || (check.method == "certificate" && signer->verifies_sha256(v02, bundle.signature))) {
      check.v02_encoding = true;
    } else {
      throw_signature_invalid("the signature does not verify: the statement was changed or signed by another key",
                              signature_path, "do not deploy this model");
    }
  }
  try {
    check.statement = parse_statement(bundle.payload);
  } catch (const Error& e) {
    throw e.with_file(signature_path);
  }
  check.predicate_type = check.statement.predicate_type;

  return check;
}

SignatureCheck check_model_signature(const std::string& model, const std::string& signature_path,
                                     const std::string& bundle_text, const SignatureTrust& trust,
                                     const ModelFilesOptions& files) {
  SignatureCheck check = check_signature_bundle(signature_path, bundle_text, trust);
  // What the signer left out, plus what the verifier asks; git's paths only
  // when the statement does not list a file under them.
  ModelFilesOptions options = files;
  options.ignore_git_paths = false;
  for (const std::string& p : check.statement.ignore_paths) {
    if (signed_name_problem(p).empty()) options.ignore_paths.push_back(p);
  }
  if (files.ignore_git_paths) {
    for (const std::string& git : kGitPaths) {
      const bool listed = std::any_of(check.statement.files.begin(), check.statement.files.end(),
                                      [&](const SignedFile& f) { return under(f.name, git); });
      if (!listed) options.ignore_paths.push_back(git);
    }
  }
  options.allow_symlinks = files.allow_symlinks || check.statement.allow_symlinks;
  options.not_files_differ = true;
  const bool directory = options.opened == nullptr && is_directory(model);
  if (directory) {
    if (auto inside = signature_name_in_model(model, signature_path, options.allow_symlinks, ErrorKind::SignatureInvalid)) {
      options.ignore_paths.push_back(*inside);
    }
  }

  const bool one_file = check.statement.files.size() == 1 && check.statement.files.front().name == ".";
  if (one_file == directory) {
    throw_signature_invalid(one_file ? "the signature is of one file, and the model is a directory"
                                     : "the signature is of a directory, and the model is one file",
                            signature_path, "this is the signature of another model");
  }
  const std::vector<SignedFile> actual = hash_model_files(model, options);
  std::map<std::string, const std::string*> have;
  for (const SignedFile& f : actual) {
    have.emplace(f.name, &f.sha256);
    if (!f.not_a_file.empty()) check.not_files.emplace(f.name, f.not_a_file);
  }
  for (const SignedFile& f : check.statement.files) {
    const auto it = have.find(f.name);
    if (it == have.end()) {
      check.missing.push_back(f.name);
    } else {
      if (*it->second != f.sha256) check.changed.push_back(f.name);
      have.erase(it);
    }
  }
  for (const auto& [name, digest] : have) check.added.push_back(name);
  return check;
}

}  // namespace tsarchive
