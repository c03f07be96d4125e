#include "core/edit/extra.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "base/bounded_json.h"
#include "base/edit_distance.h"
#include "base/error.h"
#include "base/strings.h"
#include "base/utf8.h"
#include "core/inspect/inspect.h"
#include "base/terminal_text.h"

namespace tsarchive {
namespace {

constexpr uint64_t kPreviewLimit = 1 << 20;  // larger extra files are listed, not read

std::string first_line(std::string_view text, size_t max_chars) {
  const size_t nl = text.find_first_of("\r\n");
  std::string line(text.substr(0, nl));
  if (line.size() > max_chars) {
    size_t cut = max_chars;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;  // keep UTF-8 whole
    line = line.substr(0, cut) + "...";
  } else if (nl != std::string_view::npos && text.find_first_not_of("\r\n", nl) != std::string_view::npos) {
    line += " ...";
  }
  return line;
}

std::vector<std::string> extra_name_list(const TorchArchive& archive) {
  std::vector<std::string> names;
  for (const Record& r : archive.records()) {
    if (r.kind == RecordKind::Extra) names.push_back(r.extra_name());
  }
  return names;
}

std::string extra_names(const TorchArchive& archive) {
  std::string names;
  for (const std::string& name : extra_name_list(archive)) names += (names.empty() ? "" : ", ") + name;
  return names;
}

// "did you mean 'labels.json'? it has: ..." for a name the archive lacks.
std::string missing_extra_hint(const TorchArchive& archive, std::string_view name) {
  const std::string names = extra_names(archive);
  if (names.empty()) return "the archive has no extra files";
  return did_you_mean(name, extra_name_list(archive)) + "it has: " + names;
}

bool json_name(std::string_view name) {
  return name.size() >= 5 && name.compare(name.size() - 5, 5, ".json") == 0;
}

bool same_content(const TorchArchive& archive, const Record& record, const std::string& value) {
  if (record.entry->uncompressed_size != value.size()) return false;
  return archive.read(record, value.size()) == value;
}

}  // namespace

std::optional<std::string> extra_name_problem(std::string_view name) {
  if (name.empty()) return "the name is empty";
  if (name.size() > ExtraLimits::kName) {
    return "the name is " + std::to_string(name.size()) + " bytes long; the limit is " +
           std::to_string(ExtraLimits::kName);
  }
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u == 0) return "the name contains a NUL byte";
    if (u < 0x20 || u == 0x7F) return "the name contains a control character";
    if (c == '\\') return "the name contains a backslash (use '/' between folders)";
  }
  if (!is_printable_utf8(name)) return "the name is not valid UTF-8";
  if (name.front() == '/') return "the name is an absolute path";
  if (name.size() >= 2 && name[1] == ':' && std::isalpha(static_cast<unsigned char>(name[0]))) {
    return "the name starts with a drive letter";
  }
  size_t begin = 0;
  while (true) {
    const size_t slash = name.find('/', begin);
    const std::string_view part = name.substr(begin, slash == std::string_view::npos ? name.npos : slash - begin);
    if (part.empty()) return "the name has an empty part ('//' or a trailing '/')";
    if (part == "." || part == "..") return "the name has a '" + std::string(part) + "' part";
    if (part.size() > ExtraLimits::kComponent) {
      return "a part of the name is longer than " + std::to_string(ExtraLimits::kComponent) + " bytes";
    }
    if (slash == std::string_view::npos) break;
    begin = slash + 1;
  }
  return std::nullopt;
}

void describe_extra_content(std::string_view bytes, ExtraFileInfo& info) {
  info.text = is_printable_utf8(bytes);
  info.json = false;
  info.json_problem.clear();
  info.preview.clear();
  if (!info.text) return;
  // JSON gets a compact one-line preview, parsed within JsonLimits; JSON
  // over them is previewed as text and says why.
  std::string problem;
  if (const auto doc = parse_bounded_json(bytes, &problem)) {
    info.json = true;
    info.preview = first_line(doc->dump(), 72);
    return;
  }
  if (problem != kNotValidJson) info.json_problem = problem;
  info.preview = first_line(bytes, 72);
}

std::vector<ExtraFileInfo> list_extra_files(const TorchArchive& archive) {
  std::vector<ExtraFileInfo> out;
  for (const Record& r : archive.records()) {
    if (r.kind != RecordKind::Extra) continue;
    ExtraFileInfo info;
    info.name = r.extra_name();
    info.size = r.entry->uncompressed_size;
    if (info.size <= kPreviewLimit) describe_extra_content(archive.read(r, kPreviewLimit), info);
    out.push_back(std::move(info));
  }
  return out;
}

const Record& find_extra_file(const TorchArchive& archive, std::string_view name) {
  const Record* r = archive.find(extra_record_name(name));
  if (r == nullptr) {
    throw_bad_input("no extra file '" + std::string(name) + "'", archive.path(), missing_extra_hint(archive, name));
  }
  return *r;
}

std::string read_extra(const TorchArchive& archive, std::string_view name, uint64_t max_size) {
  return archive.read(find_extra_file(archive, name), max_size);
}

void stream_extra(const TorchArchive& archive, std::string_view name, uint64_t max_size,
                  const ZipEntryReader::Sink& sink) {
  archive.read_to(find_extra_file(archive, name), max_size, sink);
}

std::string_view extra_change_id(ExtraChange change) {
  switch (change) {
    case ExtraChange::Added: return "added";
    case ExtraChange::Replaced: return "replaced";
    case ExtraChange::Unchanged: return "unchanged";
    case ExtraChange::Removed: return "removed";
    case ExtraChange::Missing: return "missing";
  }
  return "unknown";
}

namespace {

// `name`, or the extra file that escape_text shows as `name` (see plan_extra_edits).
std::string resolve_extra_name(const TorchArchive& archive, const std::string& name) {
  if (archive.find(extra_record_name(name)) != nullptr) return name;
  std::vector<std::string> matches;
  for (const Record& r : archive.records()) {
    if (r.kind != RecordKind::Extra) continue;
    const std::string stored = r.extra_name();
    if (escape_text(stored) == name) matches.push_back(stored);
  }
  if (matches.size() > 1) {
    throw_bad_input("'" + name + "' is how " + std::to_string(matches.size()) + " extra files' names are shown",
                    archive.path(), "rename them with a tool that edits ZIP entries by index");
  }
  return matches.empty() ? name : matches.front();
}

// What an edit may not do: use a name nothing else accepts, store a .json
// value that JSON readers would refuse, or put bytes that are not UTF-8 in a
// .pt2. Error(Usage) naming it.
void check_extra_edit(const TorchArchive& archive, const ExtraEdit& edit) {
  const bool existing_removal = !edit.value && archive.find(extra_record_name(edit.name)) != nullptr;
  if (auto problem = existing_removal || edit.carried ? std::nullopt : extra_name_problem(edit.name)) {
    throw_usage("cannot use '" + edit.name.substr(0, 80) + (edit.name.size() > 80 ? "...'" : "'") +
                    " as an extra file name: " + *problem,
                "names are relative paths like labels.json or config/train.yaml");
  }
  // The entry's whole name within what every reader here accepts: a longer one
  // would be written, then refused by every later command as not PyTorch's.
  const size_t entry = archive.top_folder().size() + 1 + extra_record_name(edit.name).size();
  if (edit.value && !edit.carried && archive.find(extra_record_name(edit.name)) == nullptr && entry > kMaxRecordName) {
    throw_usage("cannot use '" + edit.name.substr(0, 80) + "...' as an extra file name: the entry's name would be " +
                    std::to_string(entry) + " bytes (with '" + archive.top_folder().substr(0, 80) +
                    "/extra/'), above the " + std::to_string(kMaxRecordName) + " an archive's names may have",
                "give a shorter name");
  }
  if (edit.value && json_name(edit.name) && !edit.carried) {
    // A .json value tsarchive (and most JSON readers) would refuse to parse
    // is refused here rather than written; any other name stores any bytes.
    if (auto problem = json_limit_problem(*edit.value, JsonLimits::kDepth, UINT64_MAX)) {
      throw_usage("cannot set '" + edit.name + "': its value is " + *problem,
                  "a .json extra file must be readable as JSON; flatten it, or store it under a name "
                  "that does not end in .json");
    }
  }
  if (edit.value && archive.kind() == FileKind::ExportedProgram && !is_valid_utf8(*edit.value)) {
    // torch.export.load (load_pt2, _load_extra_files) decodes every extra
    // file as UTF-8: one byte that is not would make the archive unloadable.
    throw_usage("cannot set '" + edit.name + "' in a .pt2: its value is not UTF-8 text",
                "torch.export.load reads every extra file of a .pt2 as UTF-8; store binary data base64-encoded");
  }
}

}  // namespace

ExtraEditPlan plan_extra_edits(const TorchArchive& archive, std::vector<ExtraEdit> asked_edits, bool missing_ok) {
  // Removals may name an extra file by how it is shown (`extra list`), so
  // that names with control characters, which nothing else accepts, can go.
  // A name that differs from a stored one only in case is that record to
  // libtorch (its lookups ignore case): the edit is made to the stored name.
  std::vector<ExtraEdit> edits = std::move(asked_edits);
  for (ExtraEdit& edit : edits) {
    if (const Record* stored = archive.find(extra_record_name(edit.name))) edit.name = stored->extra_name();
    if (!edit.value) edit.name = resolve_extra_name(archive, edit.name);
  }
  // The wanted end state per name (last edit wins), and the order names were first asked for.
  std::map<std::string, std::optional<std::string>> wanted;
  std::vector<std::string> asked;
  std::map<std::string, std::string> by_folded_name;  // PyTorch's lookups ignore case: one record per folded name
  // Values are moved, not copied, from here on: carried extra files (convert,
  // trace, stamp) may be large.
  for (ExtraEdit& edit : edits) {
    check_extra_edit(archive, edit);
    const auto [first, inserted] = by_folded_name.emplace(ascii_lowered(edit.name), edit.name);
    if (!inserted && first->second != edit.name) {
      throw_usage("'" + first->second + "' and '" + edit.name +
                      "' differ only in case: PyTorch finds extra files case-insensitively, so it would read one "
                      "value for both",
                  "give them names that differ in more than case");
    }
    if (wanted.find(edit.name) == wanted.end()) asked.push_back(edit.name);
    wanted[edit.name] = std::move(edit.value);
  }

  ExtraEditPlan plan;
  std::map<std::string, ExtraChangeInfo> changes;
  std::vector<const ZipEntry*> in_file_order;
  for (const ZipEntry& e : archive.zip().entries()) in_file_order.push_back(&e);
  std::sort(in_file_order.begin(), in_file_order.end(),
            [](const ZipEntry* a, const ZipEntry* b) { return a->local_header_offset < b->local_header_offset; });
  std::map<const ZipEntry*, const Record*> record_of;
  for (const Record& r : archive.records()) record_of[r.entry] = &r;

  std::vector<ZipEntrySpec> specs;
  specs.reserve(in_file_order.size() + wanted.size());
  for (const ZipEntry* e : in_file_order) {
    const auto rec = record_of.find(e);
    const Record* record = rec == record_of.end() ? nullptr : rec->second;
    if (record == nullptr || record->kind != RecordKind::Extra) {
      specs.push_back(ZipEntrySpec::keep(*e));
      if (needs_escape(e->name)) plan.kept_unsafe_names.push_back(e->name);
      continue;
    }
    const std::string name = record->extra_name();
    const auto want = wanted.find(name);
    if (want == wanted.end()) {
      specs.push_back(ZipEntrySpec::keep(*e));
      if (needs_escape(e->name)) plan.kept_unsafe_names.push_back(e->name);
      continue;
    }
    ExtraChangeInfo info{name, ExtraChange::Removed, e->uncompressed_size, 0};
    if (want->second.has_value()) {
      std::string& value = *want->second;
      info.new_size = value.size();
      if (same_content(archive, *record, value)) {
        info.change = ExtraChange::Unchanged;
        specs.push_back(ZipEntrySpec::keep(*e));
      } else {
        info.change = ExtraChange::Replaced;
        specs.push_back(ZipEntrySpec::create(e->name, std::move(value)));
      }
    }
    changes[name] = info;
  }
  for (const std::string& name : asked) {
    if (changes.count(name) != 0) continue;
    std::optional<std::string>& value = wanted[name];
    if (value.has_value()) {
      changes[name] = ExtraChangeInfo{name, ExtraChange::Added, 0, value->size()};
      specs.push_back(ZipEntrySpec::create(archive.top_folder() + "/" + extra_record_name(name), std::move(*value)));
    } else if (missing_ok) {
      changes[name] = ExtraChangeInfo{name, ExtraChange::Missing, 0, 0};
    } else {
      throw_bad_input("no extra file '" + name + "' to remove", archive.path(),
                      missing_extra_hint(archive, name) + "; pass --missing-ok to ignore names that are not there");
    }
  }
  for (const std::string& name : asked) plan.changes.push_back(changes[name]);
  plan.zip = plan_zip_rewrite(archive.zip().source(), archive.zip().layout(), specs);
  return plan;
}

}  // namespace tsarchive
