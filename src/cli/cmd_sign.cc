// tsarchive sign MODEL --key PRIVATE.pem [-o SIG] [--certificate CERT --certificate-chain CHAIN...]
//   [--key-password-file F] [--ignore-paths P...] [--no-ignore-git-paths] [--allow-symlinks] [--json]
// tsarchive sign MODEL.pt --key PRIVATE.pem --embed [-o OUT] [...]
//
// A detached signature in OpenSSF model signing's format (core/provenance/model_signature.h),
// which `python -m model_signing verify key|certificate` accepts; or, with
// --embed, the same format over the archive's records, stored in the archive
// (core/provenance/signing_embedded.h). The options, then the operation
// (operations/sign.h), then what was written. Never loads libtorch.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "cli/lock_options.h"
#include "core/provenance/signing_embedded.h"
#include "operations/sign.h"

namespace tsarchive::cli {
namespace {

struct SignOptions {
  SignSettings settings;
  bool no_ignore_git_paths = false;
  bool json = false;
};

void render_embedded(const SignSettings& settings, const SignOutcome& result, bool json, Context& ctx) {
  const SignResult& signed_records = result.signed_model;
  if (json) {
    nlohmann::ordered_json doc = {{"schema", "tsarchive.sign/1"},
                                  {"model", settings.model},
                                  {"output", result.written},
                                  {"signature", kEmbeddedSignatureRecord},
                                  {"embedded", true},
                                  {"replaced_previous", result.replaced_previous},
                                  {"method", settings.certificate.empty() ? "key" : "certificate"},
                                  {"signer", signed_records.signer},
                                  {"records", signed_records.statement.files.size()},
                                  {"root_sha256", signed_records.statement.root_sha256}};
    ctx.out << json_text(doc, ctx.json_indent) << '\n';
    return;
  }
  const size_t n = signed_records.statement.files.size();
  ctx.out << "signed " << printable(result.written) << " (" << n << (n == 1 ? " record" : " records") << ", root sha256:"
          << signed_records.statement.root_sha256.substr(0, 16) << "...) as " << printable(signed_records.signer) << '\n';
  ctx.out << "signature stored in the archive as " << kEmbeddedSignatureRecord
          << (result.replaced_previous ? " (replacing the previous embedded signature)" : "") << '\n';
}

void render_detached(const SignSettings& settings, const SignOutcome& result, bool json, Context& ctx) {
  const SignResult& signed_files = result.signed_model;
  if (json) {
    nlohmann::ordered_json doc = {{"schema", "tsarchive.sign/1"},
                                  {"model", settings.model},
                                  {"signature", result.written},
                                  {"method", settings.certificate.empty() ? "key" : "certificate"},
                                  {"signer", signed_files.signer},
                                  {"files", signed_files.statement.files.size()},
                                  {"root_sha256", signed_files.statement.root_sha256}};
    ctx.out << json_text(doc, ctx.json_indent) << '\n';
    return;
  }
  const std::string where = result.signature_inside_model ? "inside the model directory, which verify leaves out"
                            : result.model_is_directory   ? "outside the model directory"
                                                          : "beside the model";
  const size_t n = signed_files.statement.files.size();
  ctx.out << "signed " << printable(settings.model) << " (" << n << (n == 1 ? " file" : " files") << ", root sha256:"
          << signed_files.statement.root_sha256.substr(0, 16) << "...) as " << printable(signed_files.signer) << '\n';
  ctx.out << "signature written to " << printable(result.written) << " (" << where << ")\n";
}

int run_sign(const SignOptions& opts, Context& ctx) {
  // A signature names the files it covers, and verify finds them by that name.
  if (is_standard_stream(opts.settings.model)) {
    throw_usage("sign needs the model as a file or directory, not standard input ('-'): its signature names "
                "the files it covers",
                "save the model to a file and sign that");
  }
  SignSettings settings = opts.settings;
  settings.ignore_git_paths = !opts.no_ignore_git_paths;
  const SignOutcome result = sign_model_as_asked(settings, notes_on(ctx.err));
  if (result.embedded) {
    render_embedded(settings, result, opts.json, ctx);
  } else {
    render_detached(settings, result, opts.json, ctx);
  }
  return 0;
}

}  // namespace

Runner setup_sign(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<SignOptions>();
  app.description(
      "Sign a model with an elliptic-curve key, in OpenSSF model signing's format (model_signing 1.x, a Sigstore\n"
      "bundle with an in-toto statement of every file's SHA-256): `python -m model_signing verify` accepts it, and\n"
      "so does `tsarchive verify --signature`. MODEL is one file (.pt, .ptl, .pt2, or any) or a directory, whose\n"
      "every file is signed by its path inside it; the signature file, .git, .gitattributes, .github and\n"
      ".gitignore are left out. With --embed, an archive carries its own signature (extra/tsarchive/model.sig),\n"
      "over every other record, and `tsarchive verify --key` finds it. Keys: EC P-256, P-384 or P-521 (PEM).\n"
      "Each model file is checked first as `tsarchive verify` checks it (without a key): a signature vouches for\n"
      "the bytes, so a file that is damaged, crafted, unsafe to load or changed since its stamp is not signed\n"
      "unless --allow-unverified. Does not load libtorch.\n"
      "Exit 0 signed, 1 a model file changed since it was stamped, 2 usage error (a key of another kind, a\n"
      "certificate not allowed to sign, a symbolic link without --allow-symlinks, more files than a signature\n"
      "verify reads), 3 a model file is damaged (or, with --embed, cannot hold extra files), 4 I/O error, 8 a\n"
      "model file is unsafe to load.");
  app.add_option("model", opts->settings.model, "The model: one file, or a directory")->required();
  app.add_option("--key", opts->settings.key, "The private key (PEM: EC P-256, P-384 or P-521)")->required()->type_name("PRIVATE.pem");
  app.add_option("-o,--output", opts->settings.output,
                 "Where to write the signature (default: MODEL.sig beside a file, MODEL/model.sig in a directory); "
                 "with --embed, the signed archive (default: MODEL replaced)")
      ->type_name("SIG");
  app.add_flag("--embed", opts->settings.embed,
               "Store the signature in the archive, as extra/tsarchive/model.sig, over every other record "
               "(replacing an embedded one); PyTorch loads it as before");
  add_lock_timeout(app, opts->settings.lock_timeout, "With --embed: ");
  app.add_option("--key-password-file", opts->settings.password_file,
                 "A file holding the encrypted key's password (its first line); never on the command line")
      ->type_name("FILE");
  CLI::Option* cert = app.add_option("--certificate", opts->settings.certificate,
                                     "Sign with this certificate for --key (model_signing's certificate method)")
                          ->type_name("CERT.pem");
  app.add_option("--certificate-chain", opts->settings.chain,
                 "With --certificate: the certificates between it and the root, put into the signature")
      ->type_name("CHAIN.pem")
      ->needs(cert);
  app.add_option("--ignore-paths", opts->settings.ignore_paths, "Files or folders of the model to leave out: a path from here when it lies inside the model, else relative to the model")
      ->type_name("PATH");
  app.add_flag("--no-ignore-git-paths", opts->no_ignore_git_paths,
               "Sign .git, .gitattributes, .github and .gitignore too");
  app.add_flag("--allow-symlinks", opts->settings.allow_symlinks, "Hash the files symbolic links point to instead of refusing them");
  app.add_flag("--allow-unverified", opts->settings.allow_unverified,
               "Sign model files that 'tsarchive verify' refuses (damaged, unsafe to load, changed since stamped); without it, exit 3, 8 or 1");
  app.add_option("--threads", opts->settings.threads, "Hashing threads (default: one per core)")->check(CLI::Range(1u, 256u));
  app.add_flag("--json", opts->json, "One JSON document (schema tsarchive.sign/1)");
  return [opts, &ctx] { return run_sign(*opts, ctx); };
}

}  // namespace tsarchive::cli
