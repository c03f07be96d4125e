// Signing a model, and checking a signature, as model_signing does
// (model_signature.h has the format): a model is one file (an archive: .pt,
// .ptl, .pt2, or any file) or a directory, whose every regular file is listed
// by its path relative to the directory with its SHA-256.
//
// Left out of a directory's list: the paths given to ignore, the signature
// file itself when it is inside, and .git, .gitattributes, .github and
// .gitignore; all of them are written into the statement's ignore_paths, so a
// verifier leaves them out too. A symbolic link is refused unless allowed, and
// then hashed as the file it points to (a link to a directory is refused).
//
// A signature check answers in this order: is the bundle well formed and
// signed by the key given, or by a certificate that chains to the roots given
// (Error(SignatureInvalid), exit 7, if not); then does the model hold exactly
// the files the statement lists with the digests it lists (changed, missing
// and added files named in the report, not thrown).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/provenance/model_signature.h"

namespace tsarchive {

class ByteSource;

struct ModelFilesOptions {
  std::vector<std::string> ignore_paths;  // relative to the model directory
  bool ignore_git_paths = true;
  bool allow_symlinks = false;
  unsigned threads = 0;  // 0: one per core
  // Verify: what a directory holds that is no file to hash (a symbolic link
  // not allowed, a pipe) is listed without a digest (SignedFile::not_a_file),
  // a difference from what was signed, instead of refused as a usage error.
  bool not_files_differ = false;
  // The model is one file the caller holds open (verify's locked descriptor):
  // hashed from it, never reopened by its path, so that the bytes the
  // signature covers are the bytes the caller checks.
  const ByteSource* opened = nullptr;
  // Sign, a directory: run on each file beside its hash, with the descriptor
  // hashed (`opened`, and its (st_dev, st_ino)); throws to refuse the file.
  // What it checks is what is hashed: a file swapped in the folder after it
  // was opened is another inode.
  std::function<void(const std::string& path, const ByteSource& opened, std::pair<uint64_t, uint64_t> identity)>
      check_opened;
  // Sign, a directory: run on the names of the files listed, before any is
  // hashed; throws to refuse them (a signature its verify would not read).
  std::function<void(const std::vector<std::string>& names)> check_listing;
};

// Every file of `model` with its SHA-256, sorted (sort_signed_files); "." for a
// file. Throws Error(Usage) for a symbolic link that is not allowed or a
// special file, naming it; Error(Io) when a file cannot be read.
std::vector<SignedFile> hash_model_files(const std::string& model, const ModelFilesOptions& options);

// Where sign writes by default: MODEL.sig beside a file, MODEL/model.sig in a directory.
std::string default_signature_path(const std::string& model);

// `path` as a path relative to the directory `model`, when it is inside it
// (model_signing's rule for --ignore-paths and the signature file); nothing
// otherwise. Worked out lexically (absolute, normalized): a symbolic link is
// never resolved, so the name given is the name left out, never its target.
std::optional<std::string> path_inside_model(const std::string& model, const std::string& path);

// --ignore-paths as sign and verify take them (as model_signing does): a path
// from the current directory that exists and lies inside the model directory
// (path_inside_model), or else a name relative to the model directory.
// Error(Usage) for one that is neither (absolute elsewhere, '..').
std::vector<std::string> ignore_paths_in_model(const std::string& model, const std::vector<std::string>& paths);

// A key, certificate, password or signature file's bytes (at most 64 MiB;
// Error(Io) naming `path` and saying `what` it is when it cannot be read).
std::string read_signing_file(const std::string& path, const char* what);

// Who signs: a private key, and for model_signing's certificate method the
// certificate issued for it and the chain up to (not including) the root.
struct SignerKeys {
  std::string private_key_pem, private_key_file;
  std::optional<std::string> password;
  std::string certificate_pem, certificate_file;  // empty: the key method
  std::vector<std::string> chain_pems, chain_files;
};

// Reads the files of a SignerKeys: the key, the password file's first line
// (empty path: none), the certificate and chain (empty: the key method).
// The key is parsed (Error(Usage) for another kind of key or a wrong password).
SignerKeys read_signer_keys(const std::string& key_file, const std::string& password_file,
                            const std::string& certificate_file, const std::vector<std::string>& chain_files);

struct SignRequest {
  std::string model;
  std::string signature_path;  // where it will be written (left out of a directory's files)
  SignerKeys keys;
  ModelFilesOptions files;
};

struct SignResult {
  std::string bundle;  // the signature file's text
  ModelStatement statement;
  std::string signer;  // "key sha256:..." or the certificate's subject
  uint64_t bytes_hashed = 0;
};

SignResult sign_model(const SignRequest& request);

// Signs `statement` (its files and ignore paths set; its root is computed
// here) with `keys`: the bundle, and who signed.
SignResult sign_statement(ModelStatement statement, const SignerKeys& keys);

// Who a verifier trusts: one public key, certificate roots, or (Sigstore
// keyless, sigstore_keyless.h) a trust root and the signer's identity and issuer.
struct SignatureTrust {
  std::string public_key_pem, public_key_file;
  std::vector<std::string> root_pems, root_files;
  std::string trust_root_json, trust_root_file;
  std::string identity, oidc_issuer;
};

struct SignatureCheck {
  std::string signature_path;
  std::string method;             // "key", "certificate" or "keyless"
  std::string key_fingerprint;    // sha256 hex of the signer's public key
  std::string curve;              // "P-256"
  std::string subject, issuer;    // certificate method: the signer's certificate; keyless: identity and OIDC issuer
  std::string transparency;       // keyless: the log entry, in words ("rekor.sigstore.dev entry N at T, ...")
  std::string predicate_type;
  bool v02_encoding = false;      // signed over model_signing 0.2's PAE
  bool embedded = false;          // the archive's own record (signing_embedded.h), not a file beside it
  ModelStatement statement;
  std::vector<std::string> changed, missing, added;
  std::map<std::string, std::string> not_files;  // of changed and added: what is no file, and why ("a symbolic link")
  bool matches() const { return changed.empty() && missing.empty() && added.empty(); }
};

// Checks `bundle_text` (read from `signature_path`) against `trust`, then
// `model`'s files against its statement. `extra_ignore` are more paths to leave
// out (relative to the model).
SignatureCheck check_model_signature(const std::string& model, const std::string& signature_path,
                                     const std::string& bundle_text, const SignatureTrust& trust,
                                     const ModelFilesOptions& files);

// Who signed, in words: "key sha256:HEX (P-256)", or the certificate's
// subject and issuer ("S, issued by I (key sha256:HEX16..., P-256)"; keyless:
// "S, issued by I (Sigstore keyless, P-256)").
std::string signer_text(const SignatureCheck& check);

// The first half of check_model_signature: `bundle_text` parsed, its signer
// trusted and its signature checked, its statement parsed (Error(SignatureInvalid)
// naming `signature_path` otherwise). The model is not read.
SignatureCheck check_signature_bundle(const std::string& signature_path, const std::string& bundle_text,
                                      const SignatureTrust& trust);

}  // namespace tsarchive
