// `verify` as an operation: one model checked three ways, by what it is.
//  - A directory, or (with a key or roots) a file that is not a ZIP archive:
//    its signature alone (core/provenance/signing.h).
//  - A torch.save file (ZIP or legacy), a torch.package archive or a plain
//    pickle: a ZIP's structure and every record's CRC-32, the load-safety
//    verdict (core/inspect/load_safety.h), and its detached signature.
//  - An archive (.pt, .ptl, .pt2): the core's checks and the stamp
//    (core/provenance/verify.h), the load-safety verdict, the signature
//    (embedded or detached), and with `load` libtorch's load in a worker.
// The file is opened and locked once: the embedded signature is read from the
// file whose records are checked, never from the path again.
//
// The result is report data; what the front end prints after the report
// (one error line each) is in `findings`, and the exit status in `exit_code`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/inspect/load_safety.h"
#include "core/provenance/signing.h"
#include "core/provenance/verify.h"
#include "operations/notes.h"
#include "operations/worker_settings.h"

namespace tsarchive {

class ArchiveFile;

struct VerifySettings {
  std::string model;
  bool load = false;           // also load it with libtorch, after the checks pass
  bool require_stamp = false;  // exit 1 when the archive carries no tsarchive stamp
  unsigned threads = 0;        // hashing threads (0: one per core)
  bool all_sha256 = false;     // every record's SHA-256, even with no stamp or embedded signature to compare
  LoadSafetyOptions load_safety;
  WorkerSettings worker;
  // The signature: checked when a key or roots are given.
  std::string signature;  // the signature file (default: embedded, else MODEL.sig beside it)
  std::string key;        // PUBLIC.pem
  std::vector<std::string> roots;  // ROOTS.pem
  std::string trust_root, identity, issuer;  // Sigstore keyless: trusted_root.json and who must have signed
  std::vector<std::string> ignore_paths;  // of a model directory
  // A signer named and no signature found is exit 7, unless allow_unsigned
  // (a fleet part-way through adopting signatures). require_signature says
  // the default out loud; with no signer named it is a usage error.
  bool require_signature = false;
  bool allow_unsigned = false;
  double lock_timeout = 10;

  // Whether a signer to trust was named: a key, roots or a Sigstore trust root.
  bool trusts_a_signer() const { return !key.empty() || !roots.empty() || !trust_root.empty(); }
};

// The signature's part of verify: no check when no signer to trust was given,
// or no signature was found (with allow_unsigned).
struct SignatureOutcome {
  bool asked = false;
  std::optional<SignatureCheck> check;
  std::string looked_for;  // the signature path tried, when none was found
  bool records_pending = false;  // embedded: the statement not compared with the records (a damaged archive)
  bool embedded_unchecked = false;  // no key or roots, and the archive carries a signature
  // The archive names an embedded signature, and its structure is refused
  // (why): the signature could not be read, and the refusal is the answer.
  std::string embedded_refused;
};

enum class VerifiedBy { Signature, LoadSafety, Archive };

struct VerifyResult {
  VerifiedBy by = VerifiedBy::Archive;
  std::string model;
  SignatureOutcome signature;
  bool signature_fails = false;  // the signature does not cover the file (the report must not vouch for it)
  // LoadSafety: the file's kind (TorchSave, TorchPackage, LegacyTorchSave, LegacyTar, Pickle) and its verdict.
  FileKind kind = FileKind::NotAModel;
  // LoadSafety: a ZIP's damaged records ("record 'data/3': ..."), exit 3; the verdict is then not read.
  std::vector<std::string> problems;
  LoadSafety safety;  // also of an Archive whose records verify found whole
  bool unsafe = false;
  // Archive:
  std::optional<VerifyReport> report;
  bool loaded = false;
  // To print after the report, in order, and the exit status. Exit 8 (unsafe
  // to load) has no finding here: the front end words it from `safety`, last.
  std::vector<Error> findings;
  int exit_code = 0;
};

// Throws Error for what stops verify before a report (a usage error, a file
// that cannot be read, a signature that does not verify or is missing with
// require_signature: that one first, even when the archive cannot be read).
VerifyResult verify_model(const VerifySettings& settings, const NoteSink& notes);

// In a directory scan, why `path` is no model file, judged by its first
// bytes: not a ZIP, a pickle, a legacy torch.save or tar file (config.json,
// hparams.yaml, a README), or an ONNX model, which verify does not judge.
// Nothing for a model file, and for a file named like one (.pt, .pth, .bin,
// .ckpt, .pt2, .ptl, .pkl, .pickle), which verify checks and fails as usual.
std::optional<std::string> not_a_model_file(const std::string& path);

// verify_model of a file the caller already holds open and locked (serve
// verifies the descriptor it goes on to serve): the same checks, the same
// verdict, and no second open of settings.model.
VerifyResult verify_opened(const VerifySettings& settings, const ArchiveFile& file, const NoteSink& notes);

}  // namespace tsarchive
