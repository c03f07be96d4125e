// `sign` as an operation: a detached signature in OpenSSF model signing's
// format over one file or a directory's files (core/provenance/signing.h),
// written atomically; or, with `embed`, the same format over an archive's
// records, stored in the archive (core/provenance/signing_embedded.h). Never
// loads libtorch.
#pragma once

#include <string>
#include <vector>

#include "core/provenance/signing.h"
#include "operations/notes.h"

namespace tsarchive {

struct SignSettings {
  std::string model;
  std::string key;            // PRIVATE.pem
  std::string output;         // the signature (default: MODEL.sig, MODEL/model.sig); with embed, the archive
  std::string password_file;  // the encrypted key's password (its first line)
  std::string certificate;    // the certificate method's signing certificate (empty: the key method)
  std::vector<std::string> chain;
  std::vector<std::string> ignore_paths;  // as given: inside the model, or relative to it
  bool ignore_git_paths = true;
  bool allow_symlinks = false;
  bool embed = false;
  // Sign what verify refuses (damaged, unsafe to load, changed since it was
  // stamped): by default sign checks each model file as verify does, without
  // a key, and refuses to vouch for one that fails.
  bool allow_unverified = false;
  double lock_timeout = 10;
  unsigned threads = 0;
};

struct SignOutcome {
  SignResult signed_model;  // the statement, the bundle and who signed
  std::string written;      // the signature file, or with embed the archive written
  bool embedded = false;
  bool replaced_previous = false;  // embed: an embedded signature was replaced
  bool model_is_directory = false;
  bool signature_inside_model = false;  // a directory's signature written inside it (verify leaves it out)
};

// Throws Error for what stops it (a usage error, a key of another kind, a
// model file verify refuses: exit 1, 3 or 8 as verify's); then nothing was
// written.
SignOutcome sign_model_as_asked(const SignSettings& settings, const NoteSink& notes);

}  // namespace tsarchive
