// tsarchive extra list|get|set|rm|export|import: the extra/ files of an archive.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <set>

#include <CLI/CLI.hpp>

#include "base/base64.h"
#include "base/utf8.h"
#include "cli/commands.h"
#include "cli/many_files.h"
#include "cli/output.h"
#include "cli/report_extra.h"
#include "cli/lock_options.h"
#include "base/error.h"
#include "core/edit/extra.h"
#include "core/edit/file_edit.h"
#include "core/edit/output_paths.h"
#include "core/provenance/digest.h"
#include "core/provenance/producer_info.h"
#include "core/inspect/inspect.h"
#include "core/provenance/signing_embedded.h"
#include "core/provenance/verify.h"

namespace tsarchive::cli {
namespace {

// --in-place rewrites at most this many bytes of the existing file.
constexpr uint64_t kInPlaceLimit = 64ull << 20;
constexpr const char* kRefusal = "this file cannot hold extra files";

// Options every editing subcommand shares.
struct EditFlags {
  std::string output;
  bool in_place = false;
  bool force = false;
  bool json = false;
  bool allow_damaged = false;
  double lock_timeout = 10;
};

struct ListOptions {
  std::vector<std::string> models;
  std::string model;  // the one being listed
  bool json = false;
};

struct GetOptions {
  std::string model;
  std::string name;
  std::string output;
  bool json = false;
  bool force = false;
};

struct SetOptions {
  std::string model;
  std::vector<std::string> assignments;
  EditFlags flags;
};

struct RemoveOptions {
  std::string model;
  std::vector<std::string> names;
  bool missing_ok = false;
  EditFlags flags;
};

struct ExportOptions {
  std::string model;
  std::string dir;
  bool json = false;
  bool force = false;
};

struct ImportOptions {
  std::string model;
  std::string dir;
  bool prune = false;
  EditFlags flags;
};

uint64_t value_limit(bool force) { return force ? ExtraLimits::kValueForced : ExtraLimits::kValue; }

// Reads a value file (or stdin for "-"), refusing more than `limit` bytes.
// Pipes and process substitutions work: only the bytes read count.
std::string read_value_file(const std::string& path, uint64_t limit) {
  const bool stdin_value = path == "-";
  const int fd = stdin_value ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) throw_io("no such value file", path, "check the path after '@'");
    throw_io(std::string("cannot open the value file: ") + std::strerror(errno), path);
  }
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = errno == EISDIR ? "it is a folder" : std::strerror(errno);
      if (!stdin_value) ::close(fd);
      throw_io("cannot read the value file: " + why, stdin_value ? "<stdin>" : path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > limit) {
      if (!stdin_value) ::close(fd);
      throw_usage("the value in '" + path + "' is larger than the " + std::to_string(limit) + "-byte limit for an extra file",
                  "pass --force to store it anyway (up to 4 GiB)");
    }
  }
  if (!stdin_value) ::close(fd);
  return out;
}

ExtraEdit parse_assignment(const std::string& text, bool force, bool& stdin_used) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos) {
    throw_usage("'" + text.substr(0, 80) + "' is not NAME=VALUE", "write NAME=VALUE, NAME=@FILE or NAME=@- (stdin)");
  }
  ExtraEdit edit{text.substr(0, eq), text.substr(eq + 1)};
  std::string& value = *edit.value;
  if (!value.empty() && value[0] == '@') {
    const std::string file = value.substr(1);
    if (file.empty()) throw_usage("'" + edit.name + "=@' names no file", "write NAME=@FILE or NAME=@- for stdin");
    if (file == "-") {
      if (stdin_used) throw_usage("standard input can be read once: '=@-' appears twice, or MODEL is '-' too");
      stdin_used = true;
    }
    value = read_value_file(file, value_limit(force));
  } else if (value.size() > value_limit(force)) {
    throw_usage("the value of '" + edit.name + "' is above the limit for an extra file", "pass --force");
  }
  return edit;
}

// Names are relative to extra/: "extra/labels.json" would name
// extra/extra/labels.json. Unless the archive has that file, it is taken as
// "labels.json", with a note (set and rm: names typed by the user).
std::string without_extra_prefix(const TorchArchive& archive, const std::string& name, Context& ctx) {
  if (name.rfind("extra/", 0) != 0 || name.size() == 6 || archive.find("extra/" + name) != nullptr) return name;
  print_note(ctx.err, "'" + name + "' is taken as '" + name.substr(6) + "' (extra file names are relative to extra/)");
  return name.substr(6);
}

void print_notes(const ArchiveFile& file, Context& ctx) {
  for (const std::string& note : file.notes()) print_note(ctx.err, note);
}

// A stamp covers every record: any change but to the stamp itself breaks it.
// An embedded signature covers every other record, the stamp included: one
// note when this edit changed any (an edit that removes or sets the
// signature itself says nothing of it).
void note_no_longer_covered(const StampPlace& stamp, const TorchArchive& archive, const ExtraEditPlan& plan,
                            const std::string& result, Context& ctx) {
  if (stamp.stamp != nullptr) {
    // Removing a record the stamp does not list (added after it) leaves it covering the archive.
    std::map<std::string, std::string> stamped;
    try {
      stamped = parse_stamp(archive.read(*stamp.stamp, 16ull << 20), archive.path(), stamp.stamp->name).digests;
    } catch (const Error&) {
      // An unreadable stamp: every change is named, as when it lists everything.
    }
    for (const ExtraChangeInfo& c : plan.changes) {
      const std::string record = extra_record_name(c.name);
      if (c.change == ExtraChange::Unchanged || c.change == ExtraChange::Missing || record == stamp.stamp->name ||
          (c.change == ExtraChange::Removed && !stamped.empty() && stamped.count(record) == 0)) {
        continue;
      }
      const char* as = c.change == ExtraChange::Added     ? "added"
                       : c.change == ExtraChange::Removed ? "missing"
                                                          : "changed";
      print_note(ctx.err, "the stamp (" + stamp.stamp->name + ") no longer covers " + result + " ('verify' reports extra/" +
                              c.name + " as " + as + "); run 'tsarchive stamp' to stamp it again");
      break;
    }
  }
  const auto touched = [](const ExtraChangeInfo& c) {
    return c.change != ExtraChange::Unchanged && c.change != ExtraChange::Missing;
  };
  const bool signature_edited = std::any_of(plan.changes.begin(), plan.changes.end(), [&](const ExtraChangeInfo& c) {
    return touched(c) && c.name == kEmbeddedSignatureName;
  });
  for (const ExtraChangeInfo& c : plan.changes) {
    if (signature_edited || !touched(c)) continue;
    const std::string what = "extra/" + c.name + " " + std::string(extra_change_id(c.change));
    if (std::string note = stale_signature_note(archive, result, what); !note.empty()) print_note(ctx.err, note);
    return;
  }
}

// Opens, plans and writes: the one path every edit takes.
int edit_archive(const std::string& model, std::vector<ExtraEdit> edits, const EditFlags& flags, bool missing_ok,
                 bool prune, Context& ctx, bool typed_names = false) {
  const FileAccess access = flags.in_place ? FileAccess::EditInPlace : flags.output.empty() ? FileAccess::Edit
                                                                                          : FileAccess::Read;
  // -o -: the archive goes to stdout, so the report goes to stderr.
  const bool to_stdout = is_standard_stream(flags.output);
  if (to_stdout) refuse_binary_on_terminal(ctx, "-o -", "the edited archive");
  std::ostream& report_out = report_stream(ctx, to_stdout);
  ArchiveFile file(model, access, flags.lock_timeout);
  print_notes(file, ctx);
  const auto archive = open_torchscript_archive(file.source(), kRefusal, true);
  if (typed_names) {
    for (ExtraEdit& e : edits) e.name = without_extra_prefix(*archive, e.name, ctx);
  }
  if (prune) {
    std::set<std::string> kept;
    for (const ExtraEdit& e : edits) kept.insert(e.name);
    for (const Record& r : archive->records()) {
      const std::string name = r.extra_name();
      if (r.kind == RecordKind::Extra && kept.count(name) == 0) edits.push_back(ExtraEdit{name, std::nullopt});
    }
  }
  const StampPlace stamp = locate_stamp(*archive);
  const ExtraEditPlan plan = plan_extra_edits(*archive, std::move(edits), missing_ok);  // values up to 4 GiB: moved
  // An edit keeps every other record byte for byte: on a damaged archive it
  // would carry the damage into a file that looks freshly written. The check
  // is CRC-32 and sizes only; --in-place checks just the records it rewrites,
  // so it stays constant-time (verify checks the rest).
  DigestOptions content_check;
  content_check.sha256 = false;
  if (flags.in_place) content_check.from_offset = plan.zip.first_change;
  for (const RecordDigest& d : digest_records(*archive, content_check)) {
    if (d.problem.empty()) continue;
    if (!flags.allow_damaged) {
      throw_bad_input("the archive is damaged: record '" + d.name + "': " + d.problem, model,
                      "nothing was written; run 'tsarchive verify' for details, or pass --allow-damaged to edit it "
                      "anyway");
    }
    print_note(ctx.err, "record '" + d.name + "' is damaged (" + d.problem + "); --allow-damaged: it is kept as it is");
  }
  for (const std::string& name : plan.kept_unsafe_names) {
    const std::string extra = archive->top_folder() + "/extra/";
    print_note(ctx.err, "kept the entry '" + name + "', whose name has control, bidi or non-UTF-8 characters" +
                            (name.rfind(extra, 0) == 0 ? "; remove it with: tsarchive extra rm " + shell_quoted(model) +
                                                             " " + shell_quoted(name.substr(extra.size()))
                                                       : ""));
  }
  WriteResult result;
  if (to_stdout) {
    result = file.write_stream(plan.zip, [&](std::string_view bytes) {
      ctx.data.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    });
    ctx.data.flush();
  } else if (!flags.output.empty()) {
    result = file.write_new(plan.zip, flags.output);
  } else if (flags.in_place) {
    result = file.write_in_place(plan.zip, kInPlaceLimit);
  } else {
    result = file.replace(plan.zip);
  }
  for (const std::string& note : result.notes) print_note(ctx.err, note);
  const ExtraEditReport report{model, flags.output.empty() ? model : flags.output, &plan, result};
  if (flags.json) {
    report_out << json_text(extra_edit_to_json(report)) << '\n';
  } else {
    write_text(report_out, [&](std::ostream& text) { render_extra_edit_text(report, text); });
  }
  note_no_longer_covered(stamp, *archive, plan, flags.output.empty() ? model : flags.output, ctx);
  return 0;
}

std::unique_ptr<TorchArchive> open_for_reading(const std::string& model, Context& ctx,
                                               std::unique_ptr<ArchiveFile>& file) {
  file = std::make_unique<ArchiveFile>(model, FileAccess::Read, 10.0);
  print_notes(*file, ctx);
  return open_torchscript_archive(file->source(), kRefusal, true);
}

int run_list(const ListOptions& opts, Context& ctx) {
  std::unique_ptr<ArchiveFile> file;
  const auto archive = open_for_reading(opts.model, ctx, file);
  const std::vector<ExtraFileInfo> files = list_extra_files(*archive);
  if (opts.json) {
    nlohmann::ordered_json doc = {{"schema", "tsarchive.extra-list/1"}, {"file", opts.model},
                                  {"extra_files", extra_files_to_json(files)}};
    ctx.out << json_text(doc, ctx.json_indent) << '\n';
  } else if (files.empty()) {
    ctx.out << printable(opts.model) << ": no extra files\n";
  } else {
    if (ctx.many_files) ctx.out << printable(opts.model) << ":\n";
    write_text(ctx.out, [&](std::ostream& text) { render_extra_table(files, text); });
  }
  return 0;
}

int run_get(const GetOptions& opts, Context& ctx) {
  check_output_paths({{"-o", opts.output}}, {{"the model", opts.model}});
  std::unique_ptr<ArchiveFile> file;
  const auto archive = open_for_reading(opts.model, ctx, file);
  const uint64_t limit = value_limit(opts.force);
  // To a file or a pipe the bytes stream as they are inflated (memory stays
  // bounded; `| head -c 100` gets its bytes at once). A -o file appears only
  // once the CRC has held; a pipe may have had bytes of a damaged record
  // when the error comes.
  if (!opts.json && !opts.output.empty() && !is_standard_stream(opts.output)) {
    write_file_atomically(opts.output, [&](const ChunkWriter& write) {
      stream_extra(*archive, opts.name, limit, [&](const unsigned char* data, size_t n) {
        write(std::string_view(reinterpret_cast<const char*>(data), n));
      });
    });
    return 0;
  }
  if (!opts.json && !out_is_terminal(ctx)) {
    std::ostream& sink = is_standard_stream(opts.output) ? ctx.data : ctx.out;  // -o - is kept under -q
    stream_extra(*archive, opts.name, limit, [&](const unsigned char* data, size_t n) {
      sink.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n));
    });
    sink.flush();
    return 0;
  }
  const std::string bytes = read_extra(*archive, opts.name, limit);
  if (opts.json) {
    nlohmann::ordered_json doc = {{"schema", "tsarchive.extra/1"}, {"file", opts.model}, {"name", opts.name},
                                  {"size", bytes.size()}};
    if (is_printable_utf8(bytes)) {
      doc["text"] = bytes;
    } else {
      doc["base64"] = base64_encode(bytes);
    }
    ctx.out << json_text(doc) << '\n';
  } else {
    // To a terminal, binary is refused and control, C1 and bidi characters
    // are shown escaped (output.h).
    write_content(ctx, bytes, "extra file '" + opts.name + "'", "use -o FILE, or a pipe");
  }
  return 0;
}

int run_set(const SetOptions& opts, Context& ctx) {
  // NAME=@FILE values are read too: -o must not replace one.
  std::vector<NamedPath> inputs = {{"the model", opts.model}};
  for (const std::string& a : opts.assignments) {
    const size_t at = a.find("=@");
    if (at != std::string::npos) inputs.push_back({"the value of " + a.substr(0, at), a.substr(at + 2)});
  }
  check_output_paths({{"-o", opts.flags.output}}, inputs);
  std::vector<ExtraEdit> edits;
  bool stdin_used = is_standard_stream(opts.model);  // then no value can come from it
  for (const std::string& a : opts.assignments) {
    edits.push_back(parse_assignment(a, opts.flags.force, stdin_used));
  }
  return edit_archive(opts.model, std::move(edits), opts.flags, false, false, ctx, true);
}

int run_remove(const RemoveOptions& opts, Context& ctx) {
  check_output_paths({{"-o", opts.flags.output}}, {{"the model", opts.model}});
  std::vector<ExtraEdit> edits;
  for (const std::string& name : opts.names) edits.push_back(ExtraEdit{name, std::nullopt});
  return edit_archive(opts.model, std::move(edits), opts.flags, opts.missing_ok, false, ctx, true);
}

// Without a folder: a fresh one named after the archive, in the current
// folder (m.pt -> m.extra), so nothing there can be replaced.
std::string default_export_folder(const ExportOptions& opts) {
  if (is_standard_stream(opts.model)) {
    throw_usage("an archive from standard input has no name to name the folder after", "give the folder: extra export - DIR");
  }
  std::string name = opts.model.substr(opts.model.rfind('/') + 1);  // npos + 1 == 0
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos && dot > 0) name.resize(dot);
  const std::string dir = name + ".extra";
  struct stat st {};
  if (!opts.force && ::lstat(dir.c_str(), &st) == 0) {
    throw Error(ErrorKind::Usage, "the folder " + dir + " already exists", opts.model,
                "nothing was exported; pass --force to write into it, or give another folder");
  }
  return dir;
}

int run_export(const ExportOptions& opts, Context& ctx) {
  const std::string dir = opts.dir.empty() ? default_export_folder(opts) : opts.dir;
  refuse_link_output(dir);  // the folder follows the rule of every output (output_paths.h)
  std::unique_ptr<ArchiveFile> file;
  const auto archive = open_for_reading(opts.model, ctx, file);
  ExportRules rules;
  rules.max_size = value_limit(opts.force);
  rules.force = opts.force;
  rules.archive_file = file->identity();
  const std::vector<ExportedFile> files = export_extra_files(*archive, dir, rules);
  if (opts.json) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const ExportedFile& f : files) list.push_back({{"name", f.name}, {"path", f.path}, {"size", f.size}});
    ctx.out << nlohmann::ordered_json{{"schema", "tsarchive.extra-export/1"}, {"file", opts.model},
                                      {"dir", dir}, {"files", list}}
                   .dump(2)
            << '\n';
    return 0;
  }
  TextTable t({"PATH", "SIZE"}, {TextTable::Align::Left, TextTable::Align::Right});
  for (const ExportedFile& f : files) t.add_row({f.path, human_size(f.size)});
  t.print(ctx.out, 0);
  ctx.out << "exported " << files.size() << " extra file" << (files.size() == 1 ? "" : "s") << " to " << printable(dir)
          << '\n';
  return 0;
}

int run_import(const ImportOptions& opts, Context& ctx) {
  std::vector<ExtraEdit> edits = read_extra_folder(opts.dir, value_limit(opts.flags.force));
  std::vector<NamedPath> inputs = {{"the model", opts.model}};
  for (const ExtraEdit& e : edits) inputs.push_back({"the imported file", opts.dir + "/" + e.name});
  check_output_paths({{"-o", opts.flags.output}}, inputs);
  return edit_archive(opts.model, std::move(edits), opts.flags, false, opts.prune, ctx);
}

// `values`: the command writes values (set, import), so --force has a meaning.
void add_edit_flags(CLI::App& app, EditFlags& flags, bool values) {
  CLI::Option* out = app.add_option("-o,--output", flags.output,
                                    "Write the edited archive to OUT (- for stdout; the report then goes to stderr); "
                                    "MODEL is not changed")
                          ->type_name("OUT");
  app.add_flag("--in-place", flags.in_place,
               "Rewrite only the end of MODEL (new names, records at the end): constant time, journaled")
      ->excludes(out);
  if (values) app.add_flag("--force", flags.force, "Allow values above 64 MiB (up to 4 GiB)");
  app.add_flag("--json", flags.json, "One JSON document (schema tsarchive.extra-edit/1) instead of text");
  app.add_flag("--allow-damaged", flags.allow_damaged,
               "Edit even when a record fails its CRC-32 (the damaged record is kept as it is); without it, exit 3");
  add_lock_timeout(app, flags.lock_timeout);
}

}  // namespace

Runner setup_extra(CLI::App& app, Context& ctx) {
  app.description(
      "List, read and edit the extra/ files of a TorchScript archive (.pt, .ptl) or a .pt2 without loading it.\n"
      "Edits keep every other record byte-for-byte and 64-byte aligned, and are atomic. In a .pt2 values\n"
      "must be UTF-8 text (torch.export.load decodes every extra file).");
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, Runner>> runners;

  auto list = std::make_shared<ListOptions>();
  CLI::App* list_app = app.add_subcommand("list", "Names, sizes and a preview of each extra file");
  list_app->add_option("model", list->models, "TorchScript archives or .pt2; - reads standard input")->required();
  list_app->add_flag("--json", list->json, "One JSON document (schema tsarchive.extra-list/1); JSON Lines for several");
  runners.emplace_back(list_app, [list, &ctx] {
    return for_each_file(list->models, list->json, ctx, [&](const std::string& model) {
      list->model = model;
      return run_list(*list, ctx);
    });
  });

  auto get = std::make_shared<GetOptions>();
  CLI::App* get_app = app.add_subcommand("get", "Print one extra file's bytes, or write them to a file");
  get_app->add_option("model", get->model, "TorchScript archive or .pt2; - reads standard input")->required();
  get_app->add_option("name", get->name, "Extra file name, e.g. labels.json")->required();
  CLI::Option* get_out =
      get_app->add_option("-o,--output", get->output, "Write the bytes to FILE (atomically); - for stdout");
  get_app->add_flag("--json", get->json, "Wrap the content in JSON (schema tsarchive.extra/1; base64 if binary)")
      ->excludes(get_out);
  get_app->add_flag("--force", get->force, "Allow files above 64 MiB");
  runners.emplace_back(get_app, [get, &ctx] { return run_get(*get, ctx); });

  auto set = std::make_shared<SetOptions>();
  CLI::App* set_app = app.add_subcommand("set", "Add or replace extra files, all in one rewrite");
  set_app->add_option("model", set->model, "TorchScript archive or .pt2 (- reads standard input, with -o)")->required();
  set_app->add_option("assignments", set->assignments, "NAME=VALUE, NAME=@FILE, or NAME=@- (stdin)")->required();
  add_edit_flags(*set_app, set->flags, true);
  runners.emplace_back(set_app, [set, &ctx] { return run_set(*set, ctx); });

  auto rm = std::make_shared<RemoveOptions>();
  CLI::App* rm_app = app.add_subcommand("rm", "Remove extra files");
  rm_app->add_option("model", rm->model, "TorchScript archive or .pt2 (- reads standard input, with -o)")->required();
  rm_app->add_option("names", rm->names, "Extra file names")->required();
  rm_app->add_flag("--missing-ok", rm->missing_ok, "Names that are not there are not an error");
  add_edit_flags(*rm_app, rm->flags, false);
  runners.emplace_back(rm_app, [rm, &ctx] { return run_remove(*rm, ctx); });

  auto exp = std::make_shared<ExportOptions>();
  CLI::App* exp_app = app.add_subcommand(
      "export", "Write every extra file into a folder (a/b becomes DIR/a/b), replacing no file unless --force");
  exp_app->add_option("model", exp->model, "TorchScript archive or .pt2; - reads standard input")->required();
  exp_app->add_option("dir", exp->dir,
                      "Folder, created if missing (default: MODEL's name without its suffix + .extra, in the current "
                      "folder, which must not exist yet)");
  exp_app->add_flag("--json", exp->json, "One JSON document (schema tsarchive.extra-export/1)");
  exp_app->add_flag("--force", exp->force,
                    "Replace existing files, write hidden names (a part starting with '.', like .git/config), write "
                    "into an existing default folder, and allow files above 64 MiB; never the archive itself");
  runners.emplace_back(exp_app, [exp, &ctx] { return run_export(*exp, ctx); });

  auto imp = std::make_shared<ImportOptions>();
  CLI::App* imp_app = app.add_subcommand("import", "Set extra files from every file in a folder (DIR/a/b becomes a/b)");
  imp_app->add_option("model", imp->model, "TorchScript archive or .pt2 (- reads standard input, with -o)")->required();
  imp_app->add_option("dir", imp->dir, "Folder, as written by 'extra export'")->required();
  imp_app->add_flag("--prune", imp->prune, "Also remove extra files that are not in the folder");
  add_edit_flags(*imp_app, imp->flags, true);
  runners.emplace_back(imp_app, [imp, &ctx] { return run_import(*imp, ctx); });

  return [runners] {
    for (const auto& [sub, runner] : runners) {
      if (sub->parsed()) return runner();
    }
    return static_cast<int>(ErrorKind::Usage);
  };
}

}  // namespace tsarchive::cli
