// tsarchive sign MODEL --key PRIVATE.pem [-o SIG] [--certificate CERT --certificate-chain CHAIN...]
//   [--key-password-file F] [--ignore-paths P...] [--no-ignore-git-paths] [--allow-symlinks] [--json]
// tsarchive sign MODEL.pt --key PRIVATE.pem --embed [-o OUT] [...]
//
// A detached signature in OpenSSF model signing's format (core/provenance/model_signature.h),
// which `python -m model_signing verify key|certificate` accepts; or, with
// --embed, the same format over the archive's records, stored in the archive
// (core/provenance/signing_embedded.h). Never loads libtorch.
#include <sys/stat.h>

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "base/strings.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "core/edit/file_edit.h"
#include "core/edit/output_paths.h"
#include "core/provenance/signing.h"
#include "core/provenance/signing_embedded.h"
#include "format/archive.h"

namespace tsarchive::cli {
namespace {

struct SignOptions {
  std::string model;
  std::string key;
  std::string output;
  std::string password_file;
  std::string certificate;
  std::vector<std::string> chain;
  std::vector<std::string> ignore_paths;
  bool no_ignore_git_paths = false;
  bool allow_symlinks = false;
  bool json = false;
  bool embed = false;
  double lock_timeout = 10;
  unsigned threads = 0;
};

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// --ignore-paths as model_signing takes them: a path from here that lies in
// the model, or else a path relative to the model directory.
std::vector<std::string> model_relative(const std::string& model, const std::vector<std::string>& paths) {
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
    if (!signed_name_problem(relative).empty() || relative == ".") {
      throw_usage("--ignore-paths " + p.substr(0, 200) + " is not a path inside the model",
                  "give paths relative to the model directory, e.g. --ignore-paths README.md");
    }
    out.push_back(relative);
  }
  return out;
}

// --embed: the signature goes into the archive (replaced, or -o OUT written).
int run_sign_embedded(const SignOptions& opts, Context& ctx) {
  if (is_directory(opts.model)) {
    throw_usage("--embed stores the signature in an archive, and " + opts.model + " is a directory",
                "sign a directory without --embed (its signature is MODEL/model.sig)");
  }
  if (!opts.ignore_paths.empty()) throw_usage("--ignore-paths is for directories: --embed signs every record");
  if (is_standard_stream(opts.output) || is_standard_stream(opts.model)) {
    throw_usage("sign --embed writes an archive file, not standard input or output", "give file names");
  }
  check_output_paths({{"-o", opts.output}}, {{"the model", opts.model}, {"--key", opts.key}});
  const SignerKeys keys = read_signer_keys(opts.key, opts.password_file, opts.certificate, opts.chain);
  ArchiveFile file(opts.model, opts.output.empty() ? FileAccess::Edit : FileAccess::Read, opts.lock_timeout);
  for (const std::string& note : file.notes()) print_note(ctx.err, note);
  const auto archive = open_torchscript_archive(file.source(), "cannot embed a signature in this file", true);
  const EmbedResult result = embed_signature(file, *archive, keys, opts.output, opts.threads);
  const std::string& written = opts.output.empty() ? opts.model : opts.output;
  if (opts.json) {
    nlohmann::ordered_json doc = {{"schema", "tsarchive.sign/1"},
                                  {"model", opts.model},
                                  {"output", written},
                                  {"signature", kEmbeddedSignatureRecord},
                                  {"embedded", true},
                                  {"replaced_previous", result.replaced_previous},
                                  {"method", opts.certificate.empty() ? "key" : "certificate"},
                                  {"signer", result.signed_records.signer},
                                  {"records", result.signed_records.statement.files.size()},
                                  {"root_sha256", result.signed_records.statement.root_sha256}};
    ctx.out << json_text(doc, ctx.json_indent) << '\n';
    return 0;
  }
  const size_t n = result.signed_records.statement.files.size();
  ctx.out << "signed " << shown(written) << " (" << n << (n == 1 ? " record" : " records") << ", root sha256:"
          << result.signed_records.statement.root_sha256.substr(0, 16) << "...) as "
          << shown(result.signed_records.signer) << '\n';
  ctx.out << "signature stored in the archive as " << kEmbeddedSignatureRecord
          << (result.replaced_previous ? " (replacing the previous embedded signature)" : "") << '\n';
  return 0;
}

int run_sign(const SignOptions& opts, Context& ctx) {
  if (opts.chain.size() > 0 && opts.certificate.empty()) {
    throw_usage("--certificate-chain needs --certificate (the signing certificate, issued for --key)");
  }
  if (opts.embed) return run_sign_embedded(opts, ctx);
  const std::string output = opts.output.empty() ? default_signature_path(opts.model) : opts.output;
  if (is_standard_stream(output)) throw_usage("sign writes its signature to a file, not to standard output");
  std::vector<NamedPath> inputs = {{"--key", opts.key}};
  if (!is_directory(opts.model)) inputs.push_back({"the model", opts.model});
  check_output_paths({{"-o", output}}, inputs);

  SignRequest request;
  request.model = opts.model;
  request.signature_path = output;
  request.keys = read_signer_keys(opts.key, opts.password_file, opts.certificate, opts.chain);
  request.files.ignore_paths = model_relative(opts.model, opts.ignore_paths);
  request.files.ignore_git_paths = !opts.no_ignore_git_paths;
  request.files.allow_symlinks = opts.allow_symlinks;
  request.files.threads = opts.threads;

  const SignResult result = sign_model(request);
  write_file_atomically(output, result.bundle);

  const bool inside = is_directory(opts.model) && path_inside_model(opts.model, output).has_value();
  const std::string where = inside ? "inside the model directory, which verify leaves out"
                                   : is_directory(opts.model) ? "outside the model directory" : "beside the model";
  if (opts.json) {
    nlohmann::ordered_json doc = {{"schema", "tsarchive.sign/1"},
                                  {"model", opts.model},
                                  {"signature", output},
                                  {"method", opts.certificate.empty() ? "key" : "certificate"},
                                  {"signer", result.signer},
                                  {"files", result.statement.files.size()},
                                  {"root_sha256", result.statement.root_sha256}};
    ctx.out << json_text(doc, ctx.json_indent) << '\n';
    return 0;
  }
  const size_t n = result.statement.files.size();
  ctx.out << "signed " << shown(opts.model) << " (" << n << (n == 1 ? " file" : " files") << ", root sha256:"
          << result.statement.root_sha256.substr(0, 16) << "...) as " << shown(result.signer) << '\n';
  ctx.out << "signature written to " << shown(output) << " (" << where << ")\n";
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
      "Does not load libtorch.\n"
      "Exit 0 signed, 2 usage error (a key of another kind, a symbolic link without --allow-symlinks), 3 with\n"
      "--embed: the archive is damaged or cannot hold extra files, 4 I/O error.");
  app.add_option("model", opts->model, "The model: one file, or a directory")->required();
  app.add_option("--key", opts->key, "The private key (PEM: EC P-256, P-384 or P-521)")->required()->type_name("PRIVATE.pem");
  app.add_option("-o,--output", opts->output,
                 "Where to write the signature (default: MODEL.sig beside a file, MODEL/model.sig in a directory); "
                 "with --embed, the signed archive (default: MODEL replaced)")
      ->type_name("SIG");
  app.add_flag("--embed", opts->embed,
               "Store the signature in the archive, as extra/tsarchive/model.sig, over every other record "
               "(replacing an embedded one); PyTorch loads it as before");
  app.add_option("--lock-timeout", opts->lock_timeout, "With --embed: seconds to wait for another editor (default 10)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--key-password-file", opts->password_file,
                 "A file holding the encrypted key's password (its first line); never on the command line")
      ->type_name("FILE");
  CLI::Option* cert = app.add_option("--certificate", opts->certificate,
                                     "Sign with this certificate for --key (model_signing's certificate method)")
                          ->type_name("CERT.pem");
  app.add_option("--certificate-chain", opts->chain,
                 "With --certificate: the certificates between it and the root, put into the signature")
      ->type_name("CHAIN.pem")
      ->needs(cert);
  app.add_option("--ignore-paths", opts->ignore_paths, "Files or folders of the model to leave out (relative to it)")
      ->type_name("PATH");
  app.add_flag("--no-ignore-git-paths", opts->no_ignore_git_paths,
               "Sign .git, .gitattributes, .github and .gitignore too");
  app.add_flag("--allow-symlinks", opts->allow_symlinks, "Hash the files symbolic links point to instead of refusing them");
  app.add_option("--threads", opts->threads, "Hashing threads (default: one per core)")->check(CLI::Range(1u, 256u));
  app.add_flag("--json", opts->json, "One JSON document (schema tsarchive.sign/1)");
  return [opts, &ctx] { return run_sign(*opts, ctx); };
}

}  // namespace tsarchive::cli
