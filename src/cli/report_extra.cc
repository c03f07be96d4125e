#include "cli/report_extra.h"

#include "cli/output.h"

namespace tsarchive::cli {

using json = nlohmann::ordered_json;

void render_extra_table(const std::vector<ExtraFileInfo>& files, std::ostream& out) {
  TextTable t({"NAME", "SIZE", "PREVIEW"}, {TextTable::Align::Left, TextTable::Align::Right, TextTable::Align::Left});
  for (const ExtraFileInfo& e : files) {
    std::string preview = e.preview;
    if (!e.text) preview = e.size > (1 << 20) ? "(large; not read)" : "(binary)";
    if (!e.json_problem.empty()) preview = "(" + e.json_problem + ")";
    t.add_row({e.name, human_size(e.size), preview});
  }
  t.print(out);
}

json extra_files_to_json(const std::vector<ExtraFileInfo>& files) {
  json extra = json::array();
  for (const ExtraFileInfo& e : files) {
    json item = {{"name", e.name}, {"size", e.size}, {"text", e.text}, {"json", e.json}, {"preview", e.preview}};
    if (!e.json_problem.empty()) item["json_problem"] = e.json_problem;
    extra.push_back(std::move(item));
  }
  return extra;
}

void render_extra_edit_text(const ExtraEditReport& r, std::ostream& out) {
  TextTable t({"CHANGE", "NAME", "SIZE"}, {TextTable::Align::Left, TextTable::Align::Left, TextTable::Align::Right});
  for (const ExtraChangeInfo& c : r.plan->changes) {
    std::string size;
    switch (c.change) {
      case ExtraChange::Added: size = human_size(c.new_size); break;
      case ExtraChange::Replaced: size = human_size(c.old_size) + " -> " + human_size(c.new_size); break;
      case ExtraChange::Unchanged: size = human_size(c.new_size); break;
      case ExtraChange::Removed: size = human_size(c.old_size); break;
      case ExtraChange::Missing: size = "(not there)"; break;
    }
    t.add_row({std::string(extra_change_id(c.change)), c.name, size});
  }
  t.print(out, 0);
  const ZipRewritePlan& zip = r.plan->zip;
  if (!r.result.written) {
    out << "nothing written: " << r.path << " is already as asked\n";
    return;
  }
  if (r.result.in_place) {
    out << "updated " << r.output << " in place: rewrote its last " << human_size(r.result.bytes_written) << "; "
        << human_size(r.result.size) << " now\n";
    return;
  }
  out << "wrote " << r.output << ": " << human_size(r.result.size) << ", " << with_commas(zip.entries_kept)
      << " records kept byte-for-byte";
  if (zip.entries_realigned > 0) out << ", " << with_commas(zip.entries_realigned) << " moved and re-aligned";
  if (zip.entries_written > 0) out << ", " << with_commas(zip.entries_written) << " written";
  out << '\n';
}

json extra_edit_to_json(const ExtraEditReport& r) {
  json changes = json::array();
  for (const ExtraChangeInfo& c : r.plan->changes) {
    json jc = {{"name", c.name}, {"change", extra_change_id(c.change)}};
    if (c.change == ExtraChange::Added || c.change == ExtraChange::Replaced || c.change == ExtraChange::Unchanged) {
      jc["size"] = c.new_size;
    }
    if (c.change == ExtraChange::Replaced || c.change == ExtraChange::Removed) jc["previous_size"] = c.old_size;
    changes.push_back(jc);
  }
  const ZipRewritePlan& zip = r.plan->zip;
  return json{{"schema", "tsarchive.extra-edit/1"},
              {"file", r.path},
              {"output", r.output},
              {"changes", changes},
              {"written", r.result.written},
              {"in_place", r.result.in_place},
              {"bytes_written", r.result.bytes_written},
              {"size", r.result.size},
              {"records_kept", zip.entries_kept},
              {"records_realigned", zip.entries_realigned},
              {"records_written", zip.entries_written}};
}

}  // namespace tsarchive::cli
