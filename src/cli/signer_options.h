// The options that name whom to trust and where a model's signature is,
// shared by verify and serve (which verifies on the descriptor it serves).
#pragma once

#include <cstddef>

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "operations/verify.h"

namespace tsarchive::cli {

// Whom to trust (a key, certificate roots or a Sigstore trust root) and where the signature is.
// `directories`: the models may be directories (--ignore-paths).
inline void add_signer_options(CLI::App& app, VerifySettings& settings, bool directories) {
  CLI::Option* key = app.add_option("--key", settings.key,
                 "Check the model's signature (OpenSSF model signing) against this public key (PEM, EC P-256/384/521)")
      ->type_name("PUBLIC.pem");
  CLI::Option* roots = app.add_option("--certificate-chain", settings.roots,
                 "Check the model's signature against these root certificates (model_signing's certificate method)")
      ->type_name("ROOTS.pem")
      ->excludes(key);
  CLI::Option* trust_root =
      app.add_option("--trust-root", settings.trust_root,
                     "Check a Sigstore keyless signature offline against this trust root (trusted_root.json); "
                     "needs --identity and --issuer")
          ->type_name("trusted_root.json")
          ->excludes(key)
          ->excludes(roots);
  app.add_option("--identity", settings.identity,
                 "With --trust-root: the signer's email or URI, exactly as in its certificate")
      ->type_name("ID")
      ->needs(trust_root);
  app.add_option("--issuer", settings.issuer, "With --trust-root: the OIDC issuer URL of the signer's identity, exactly")
      ->type_name("URL")
      ->needs(trust_root);
  app.add_option("--signature", settings.signature,
                 "The signature file (default: the archive's embedded signature, else MODEL.sig beside a file, "
                 "MODEL/model.sig in a directory); needs --key, --certificate-chain or --trust-root")
      ->type_name("SIG");
  CLI::Option* require = app.add_flag(
      "--require-signature", settings.require_signature,
      "Exit 7 when no signature is found, embedded or not: the default with --key, --certificate-chain or --trust-root");
  app.add_flag("--allow-unsigned", settings.allow_unsigned,
               "With a signer named: check a signature when the model has one, and let a model without one pass "
               "(\"signature none\"); for a fleet part-way through adopting signatures")
      ->excludes(require);
  if (!directories) return;
  app.add_option("--ignore-paths", settings.ignore_paths,
                 "Files of a model directory that are not checked against the signature: a path from here when it "
                 "lies inside the model, else relative to the model (as sign takes them)")
      ->type_name("PATH");
}

// What the parser cannot say of the signer options, for `models` models.
inline void check_signer_options(const VerifySettings& settings, size_t models) {
  if ((!settings.signature.empty() || settings.require_signature || settings.allow_unsigned) &&
      !settings.trusts_a_signer()) {
    throw_usage("--signature, --require-signature and --allow-unsigned need --key PUBLIC.pem, --certificate-chain "
                "ROOTS.pem or --trust-root",
                "say whom you trust: the signer's public key, the roots of its certificate, or Sigstore's trust root");
  }
  if (!settings.trust_root.empty() && (settings.identity.empty() || settings.issuer.empty())) {
    throw_usage("--trust-root needs --identity ID and --issuer URL",
                "say who must have signed: the certificate's email or URI, and its OIDC issuer");
  }
  if (!settings.signature.empty() && models > 1) {
    throw_usage("--signature names one signature, and several models are given",
                "leave it out (each model's embedded signature, else MODEL.sig beside it, is used), or give one model");
  }
}

}  // namespace tsarchive::cli
