// tsarchive stamp MODEL [-o OUT] [--field KEY=VALUE]... [--no-host] [--no-git] [--keep-bytes] [--json]
//   [--sign-key PRIVATE.pem [--key-password-file F]]
//
// The options of `stamp`, the operation (operations/stamp.h), and its report.
#include <CLI/CLI.hpp>
#include <map>
#include <optional>
#include <vector>

#include "base/bounded_json.h"
#include "base/error.h"
#include "cli/commands.h"
#include "cli/many_files.h"
#include "cli/output.h"
#include "cli/worker_options.h"
#include "cli/lock_options.h"
#include "core/edit/output_paths.h"
#include "core/provenance/producer_info.h"
#include "core/provenance/signing.h"
#include "core/provenance/signing_embedded.h"
#include "operations/stamp.h"

namespace tsarchive::cli {
namespace {

struct StampOptions {
  std::vector<std::string> models;
  std::string model;  // the one being stamped
  std::string output;
  std::vector<std::string> fields;
  bool no_host = false;
  bool no_git = false;
  bool keep_bytes = false;
  bool in_place = false;
  bool json = false;
  double lock_timeout = 10;
  std::string sign_key, key_password_file;
  std::optional<SignerKeys> signer;  // read from sign_key once
  WorkerSettings worker;
};

std::map<std::string, std::string> parse_fields(const std::vector<std::string>& fields) {
  std::map<std::string, std::string> out;
  for (const std::string& f : fields) {
    const size_t eq = f.find('=');
    if (eq == std::string::npos) throw_usage("--field '" + f.substr(0, 80) + "' is not KEY=VALUE");
    const std::string key = f.substr(0, eq);
    if (auto problem = stamp_field_problem(key)) {
      throw_usage("--field " + key.substr(0, 80) + ": " + *problem, "choose another key, e.g. --field team=vision");
    }
    if (!out.emplace(key, f.substr(eq + 1)).second) throw_usage("--field " + key + " is given twice");
  }
  return out;
}

void print_stamp_report(const StampOptions& opts, const StampResult& outcome, Context& ctx) {
  const ParsedStamp stamp = parse_stamp(outcome.stamp, opts.model);
  const std::string& output = opts.output.empty() ? opts.model : opts.output;
  // A re-save writes the linked libtorch's conventions: older archives come
  // back with a higher format version, which older readers refuse.
  const std::optional<int64_t>& before = outcome.version_before;
  const bool raised = before && outcome.version_after && *outcome.version_after > *before;
  std::string raised_line;
  if (raised) {
    raised_line = "the re-save raised the format version from " + std::to_string(*before) + " to " +
                  std::to_string(*outcome.version_after) + ": readers now need a libtorch that reads format version " +
                  std::to_string(*outcome.version_after) + " (use --keep-bytes to keep " + std::to_string(*before) + ")";
  }
  if (opts.json) {
    nlohmann::ordered_json doc = {{"schema", "tsarchive.stamp/1"}, {"file", opts.model}, {"output", output},
                                  {"method", outcome.keep_bytes ? "keep-bytes" : "export-hook"},
                                  {"replaced_previous", outcome.replaced_previous},
                                  {"stamp_record", outcome.stamp_record},
                                  {"producer_info_kept", outcome.producer_kept},
                                  {"size", outcome.size}};
    const auto version_json = [](const std::optional<int64_t>& v) {
      return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
    };
    doc["format_version"] = {{"before", version_json(before)}, {"after", version_json(outcome.version_after)},
                             {"raised", raised}};
    if (raised) doc["format_version"]["note"] = raised_line;
    doc["notes"] = outcome.notes;
    doc["signature"] = outcome.signer.empty() ? nlohmann::ordered_json()
                                              : nlohmann::ordered_json{{"record", kEmbeddedSignatureRecord},
                                                                       {"signer", outcome.signer}};
    if (auto parsed = parse_bounded_json<nlohmann::ordered_json>(outcome.stamp)) doc["stamp"] = std::move(*parsed);
    ctx.out << json_text(doc, ctx.json_indent) << '\n';
    return;
  }
  ctx.out << "stamped " << printable(output) << " ("
          << (outcome.keep_bytes ? "keep-bytes" : "libtorch re-save with the export hook") << "): "
          << stamp.digests.size() + 1 << " records (the stamp and the " << stamp.digests.size()
          << " it digests), root " << stamp.root.substr(0, 16) << "...\n";  // verify counts the stamp too
  if (outcome.stamp_record != kStampRecord) {
    ctx.out << "  stamp in " << outcome.stamp_record << ": extra/" << kStampName
            << " is the producer's own and was kept as it is\n";
  }
  if (outcome.replaced_previous) ctx.out << "  replaced the previous stamp (its digest is kept under \"previous\")\n";
  if (raised) ctx.out << "  " << raised_line << '\n';
  if (!outcome.signer.empty()) {
    ctx.out << "  signed as " << printable(outcome.signer) << " (embedded: " << kEmbeddedSignatureRecord << ")\n";
  }
}

int run_stamp(const StampOptions& opts, Context& ctx) {
  if (is_standard_stream(opts.output)) {
    throw_usage("stamp cannot write to standard output (-o -): libtorch's re-save and the stamp are checked in a file",
                "write to a file with -o FILE, then pipe that");
  }
  check_output_paths({{"-o", opts.output}}, {{"the model", opts.model}, {"--sign-key", opts.sign_key}});
  StampSettings settings;
  settings.model = opts.model;
  settings.output = opts.output;
  settings.fields = parse_fields(opts.fields);
  settings.host = !opts.no_host;
  settings.git = !opts.no_git;
  settings.keep_bytes = opts.keep_bytes;
  settings.in_place = opts.in_place;
  settings.lock_timeout = opts.lock_timeout;
  if (opts.signer) settings.signer = &*opts.signer;
  settings.worker = opts.worker;
  const StampResult result = stamp_archive(settings, notes_on(ctx.err));
  for (const std::string& note : result.notes) print_note(ctx.err, note);
  print_stamp_report(opts, result, ctx);
  return 0;
}

}  // namespace

Runner setup_stamp(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<StampOptions>();
  app.description(
      "Write extra/producer_info.json: who and what produced the archive (tool, libtorch, git commit, CI run,\n"
      "host), when (SOURCE_DATE_EPOCH honoured), and the SHA-256 of every record, for 'tsarchive verify'.\n"
      "By default libtorch re-saves the module with the stamp supplied by its export hook, and the copy is\n"
      "loaded back and compared before it replaces anything. --keep-bytes adds the stamp without libtorch,\n"
      "keeping every other record byte-identical; archives from a newer PyTorch than the linked libtorch, and\n"
      ".ptl and .pt2 files, are always stamped that way (with a note). A re-save that raises the format version\n"
      "says so.");
  app.add_option("model", opts->models,
                 "Archives to stamp (.pt; .ptl and .pt2 are stamped with --keep-bytes); - reads stdin, with -o")
      ->required();
  app.add_option("-o,--output", opts->output, "Write the stamped archive here instead of replacing MODEL");
  app.add_option("--field", opts->fields, "Add a string field KEY=VALUE to the stamp (repeatable)");
  app.add_flag("--no-host", opts->no_host, "Leave out the host name and user");
  app.add_flag("--no-git", opts->no_git, "Leave out the git checkout of the working directory");
  CLI::Option* keep_bytes = app.add_flag("--keep-bytes", opts->keep_bytes,
               "Add the stamp without loading libtorch; every other record stays byte-identical");
  CLI::Option* output = app.get_option("--output");
  app.add_flag("--in-place", opts->in_place,
               "With --keep-bytes: rewrite only the end of MODEL (the stamp, the directory), journaled, instead of "
               "a new copy")
      ->needs(keep_bytes)
      ->excludes(output);
  app.add_flag("--json", opts->json, "One JSON document (schema tsarchive.stamp/1) with the stamp written; JSON Lines for several");
  add_lock_timeout(app, opts->lock_timeout);
  CLI::Option* sign_key = app.add_option("--sign-key", opts->sign_key,
                 "Also sign the stamped archive with this private key, in the same write (as sign --embed does)")
      ->type_name("PRIVATE.pem");
  app.add_option("--key-password-file", opts->key_password_file, "The --sign-key's password file (its first line)")
      ->type_name("FILE")
      ->needs(sign_key);
  add_worker_options(app, opts->worker, false, "For the re-save: ");  // a stamp vouches for checked records only
  return [opts, &ctx] {
    // The key is read once, before any archive: a wrong one fails before anything is written.
    if (!opts->sign_key.empty()) opts->signer = read_signer_keys(opts->sign_key, opts->key_password_file, "", {});
    if (opts->models.size() > 1 && !opts->output.empty()) {
      throw_usage("-o names one output; " + std::to_string(opts->models.size()) + " archives were given",
                  "stamp them in place, or one at a time with -o");
    }
    return for_each_file(opts->models, opts->json, ctx, [&](const std::string& model) {
      opts->model = model;
      return run_stamp(*opts, ctx);
    });
  };
}

}  // namespace tsarchive::cli
