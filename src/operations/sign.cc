#include "operations/sign.h"

#include "base/error.h"
#include "base/posix_fd.h"
#include "core/edit/file_edit.h"
#include "core/edit/output_paths.h"
#include "core/provenance/signing_embedded.h"
#include "format/archive.h"

namespace tsarchive {
namespace {

// The signature goes into the archive (replaced, or `output` written).
SignOutcome sign_embedded(const SignSettings& s, const NoteSink& notes) {
  if (is_directory(s.model)) {
    throw_usage("--embed stores the signature in an archive, and " + s.model + " is a directory",
                "sign a directory without --embed (its signature is MODEL/model.sig)");
  }
  if (!s.ignore_paths.empty()) throw_usage("--ignore-paths is for directories: --embed signs every record");
  if (is_standard_stream(s.output) || is_standard_stream(s.model)) {
    throw_usage("sign --embed writes an archive file, not standard input or output", "give file names");
  }
  check_output_paths({{"-o", s.output}}, {{"the model", s.model}, {"--key", s.key}});
  const SignerKeys keys = read_signer_keys(s.key, s.password_file, s.certificate, s.chain);
  ArchiveFile file(s.model, s.output.empty() ? FileAccess::Edit : FileAccess::Read, s.lock_timeout);
  for (const std::string& note : file.notes()) notes(note);
  const auto archive = open_torchscript_archive(file.source(), "cannot embed a signature in this file", true);
  const EmbedResult embedded = embed_signature(file, *archive, keys, s.output, s.threads);
  SignOutcome out;
  out.signed_model = embedded.signed_records;
  out.written = s.output.empty() ? s.model : s.output;
  out.embedded = true;
  out.replaced_previous = embedded.replaced_previous;
  return out;
}

// A detached signature, written atomically beside the model or to `output`.
SignOutcome sign_detached(const SignSettings& s) {
  const std::string output = s.output.empty() ? default_signature_path(s.model) : s.output;
  if (is_standard_stream(output)) throw_usage("sign writes its signature to a file, not to standard output");
  SignOutcome out;
  out.model_is_directory = is_directory(s.model);
  std::vector<NamedPath> inputs = {{"--key", s.key}};
  if (!out.model_is_directory) inputs.push_back({"the model", s.model});
  check_output_paths({{"-o", output}}, inputs);

  SignRequest request;
  request.model = s.model;
  request.signature_path = output;
  request.keys = read_signer_keys(s.key, s.password_file, s.certificate, s.chain);
  request.files.ignore_paths = ignore_paths_in_model(s.model, s.ignore_paths);
  request.files.ignore_git_paths = s.ignore_git_paths;
  request.files.allow_symlinks = s.allow_symlinks;
  request.files.threads = s.threads;
  out.signed_model = sign_model(request);
  write_file_atomically(output, out.signed_model.bundle);
  out.written = output;
  out.signature_inside_model = out.model_is_directory && path_inside_model(s.model, output).has_value();
  return out;
}

}  // namespace

SignOutcome sign_model_as_asked(const SignSettings& settings, const NoteSink& notes) {
  if (!settings.chain.empty() && settings.certificate.empty()) {
    throw_usage("--certificate-chain needs --certificate (the signing certificate, issued for --key)");
  }
  return settings.embed ? sign_embedded(settings, notes) : sign_detached(settings);
}

}  // namespace tsarchive
