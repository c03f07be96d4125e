#include "cli/report_diff.h"

#include <algorithm>
#include <cstdio>

#include "cli/output.h"

namespace tsarchive::cli {
namespace {

using Align = TextTable::Align;
using json = nlohmann::ordered_json;

struct Counts {
  uint64_t changed = 0, added = 0, removed = 0;
};

template <typename Item>
Counts count(const std::vector<Item>& items) {
  Counts c;
  for (const Item& item : items) {
    (item.change == Change::Changed ? c.changed : item.change == Change::Added ? c.added : c.removed) += 1;
  }
  return c;
}

// "6 records changed (detail), 4 added, 1 removed"; "" when nothing changed.
std::string counts_phrase(const Counts& c, const char* noun, const std::string& changed_detail = {}) {
  std::string out;
  auto add = [&](uint64_t n, const char* what, const std::string& detail) {
    if (n == 0) return;
    out += (out.empty() ? plural(n, noun) : ", " + with_commas(n)) + " " + what + detail;
  };
  add(c.changed, "changed", changed_detail);
  add(c.added, "added", {});
  add(c.removed, "removed", {});
  return out;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string summary_line(const ArchiveDiff& d) {
  std::vector<std::string> parts{counts_phrase(count(d.records), "record")};
  if (d.tensors_compared) {
    const std::optional<double> max = d.max_abs_diff();
    parts.push_back(counts_phrase(count(d.tensors), "tensor", max ? " (max abs diff " + number(*max) + ")" : ""));
  }
  if (d.code_compared && !d.code.empty()) parts.push_back("code changed in " + plural(d.code.size(), "file"));
  parts.push_back(counts_phrase(count(d.extra), "extra file"));
  std::string line;
  for (const std::string& p : parts) {
    if (!p.empty()) line += (line.empty() ? "" : "; ") + p;
  }
  return line;
}

void render_summary(const ArchiveDiff& d, std::ostream& out) {
  out << printable(d.old_side.path) << " -> " << printable(d.new_side.path) << ": " << (d.same() ? "same" : "different") << '\n';
  if (d.same()) {
    out << "  " << plural(d.records_compared, "record") << " compared, all equal";
    if (d.tensors_compared) out << "; " << plural(d.tensors_matched, "tensor");
    out << '\n';
  } else {
    out << "  " << summary_line(d) << '\n';
  }
  for (const std::string& note : d.notes) out << "  note: " << printable(note) << '\n';
  if (d.records_equal_by_crc > 0) {
    out << "  note: " << plural(d.records_equal_by_crc, "record") << " (" << human_size(d.bytes_equal_by_crc)
        << ") taken as equal by size and CRC-32 without reading " << (d.records_equal_by_crc == 1 ? "it" : "them")
        << "; --full compares every byte\n";
  }
  if (!d.records_ignored.empty()) {
    std::string names;
    for (const std::string& name : d.records_ignored) names += (names.empty() ? "" : ", ") + name;
    out << "  note: not compared, as asked: " << printable(names) << '\n';
  }
}

std::string size_or_dash(const RecordChange& r, bool new_side) {
  const bool present = new_side ? r.change != Change::Removed : r.change != Change::Added;
  return present ? with_commas(new_side ? r.new_size : r.old_size) : "-";
}

void render_records(const ArchiveDiff& d, std::ostream& out) {
  if (d.records.empty()) return;
  const Counts c = count(d.records);
  out << "\nRecords (" << d.records.size() << " of " << d.records_compared + c.added + c.removed << " differ)\n";
  const bool renumbered = std::any_of(d.records.begin(), d.records.end(),
                                      [](const RecordChange& r) { return !r.same_as_old.empty(); });
  std::vector<std::string> headers{"CHANGE", "NAME", "KIND", "OLD BYTES", "NEW BYTES"};
  if (renumbered) headers.push_back("SAME AS OLD");
  TextTable t(headers, {Align::Left, Align::Left, Align::Left, Align::Right, Align::Right, Align::Left});
  for (const RecordChange& r : d.records) {
    t.add_row({std::string(change_id(r.change)), r.name, std::string(record_kind_id(r.kind)), size_or_dash(r, false),
               size_or_dash(r, true), r.same_as_old});
  }
  t.print(out);
  if (renumbered) {
    out << "  SAME AS OLD: the old record with this size and CRC-32; a tensor added or removed renumbered the\n"
        << "  storages after it, so these records moved rather than changed\n";
  }
}

// "values, layout"; "added"; "not compared"
std::string tensor_change_text(const TensorChange& t) {
  if (t.change != Change::Changed) return std::string(change_id(t.change));
  std::string s;
  auto add = [&](bool on, const char* what) {
    if (on) s += (s.empty() ? "" : ", ") + std::string(what);
  };
  add(t.dtype_changed, "dtype");
  add(t.shape_changed, "shape");
  add(t.values.compared && t.values.differing > 0, "values");
  add(t.layout_changed, "layout");
  add(t.device_changed, "device");
  const bool unread = !t.dtype_changed && !t.shape_changed && !t.values.compared && !t.values.note.empty();
  add(unread, "not compared");
  return s;
}

std::string either(const std::string& a, const std::string& b) { return a == b ? a : a + " -> " + b; }

void render_tensors(const ArchiveDiff& d, std::ostream& out) {
  if (!d.tensors_compared || d.tensors.empty()) return;
  const Counts c = count(d.tensors);
  out << "\nTensors (" << d.tensors.size() << " of " << d.tensors_matched + c.added + c.removed << " differ)\n";
  TextTable t({"PATH", "CHANGE", "DTYPE", "SHAPE", "DIFFERING", "MAX ABS DIFF", "AT", "OLD -> NEW"},
              {Align::Left, Align::Left, Align::Left, Align::Left, Align::Right, Align::Right, Align::Left,
               Align::Left});
  std::vector<std::string> details;
  for (const TensorChange& tc : d.tensors) {
    const TensorInfo& a = tc.change == Change::Added ? tc.new_tensor : tc.old_tensor;
    const TensorInfo& b = tc.change == Change::Removed ? tc.old_tensor : tc.new_tensor;
    std::vector<std::string> row{tc.path, tensor_change_text(tc), either(a.dtype, b.dtype),
                                 either(shape_text(a.shape), shape_text(b.shape))};
    const TensorValueDiff& v = tc.values;
    if (v.compared) {
      std::string differing = with_commas(v.differing) + " of " + with_commas(v.elements);
      if (v.nonfinite > 0) differing += " (" + with_commas(v.nonfinite) + " NaN/inf)";
      row.push_back(differing);
      row.push_back(v.max_abs_diff ? number(*v.max_abs_diff) : "-");
      row.push_back(v.max_abs_diff ? shape_text(v.max_index) : "");
      row.push_back(v.old_value && v.new_value ? number(*v.old_value) + " -> " + number(*v.new_value) : "");
    }
    t.add_row(std::move(row));
    if (tc.layout_changed) {
      details.push_back(tc.path + ": stride " + shape_text(a.stride) + " offset " + std::to_string(a.storage_offset) +
                        " -> stride " + shape_text(b.stride) + " offset " + std::to_string(b.storage_offset));
    }
    if (tc.device_changed) details.push_back(tc.path + ": saved from " + a.device + " -> " + b.device);
    if (!v.note.empty()) details.push_back(tc.path + ": " + v.note);
  }
  t.print(out);
  for (const std::string& line : details) out << "  " << printable(line) << '\n';
}

void render_code(const ArchiveDiff& d, std::ostream& out) {
  if (!d.code_compared || d.code.empty()) return;
  out << "\nCode (" << plural(d.code.size(), "file") << ")\n";
  for (const CodeChange& c : d.code) {
    if (!c.text) {
      out << printable(c.record) << ": " << change_id(c.change) << "; not UTF-8 text, so not shown\n";
    } else if (!c.diff.computed) {
      out << printable(c.record) << ": " << change_id(c.change) << "; too different to show as a diff (" << with_commas(c.diff.old_lines)
          << " -> " << with_commas(c.diff.new_lines) << " lines)\n";
    } else {
      out << c.diff.unified;
    }
  }
}

void render_extra(const ArchiveDiff& d, std::ostream& out) {
  if (d.extra.empty()) return;
  out << "\nExtra files (" << d.extra.size() << ")\n";
  TextTable t({"CHANGE", "NAME", "OLD SIZE", "NEW SIZE"}, {Align::Left, Align::Left, Align::Right, Align::Right});
  for (const ExtraFileChange& e : d.extra) {
    t.add_row({std::string(change_id(e.change)), e.name, e.change == Change::Added ? "-" : human_size(e.old_size),
               e.change == Change::Removed ? "-" : human_size(e.new_size)});
  }
  t.print(out);
}

json side_json(const DiffSide& s) {
  return {{"file", s.path},    {"kind", file_kind_id(s.kind)}, {"top_folder", s.top_folder},
          {"size", s.file_size}, {"records", s.records},       {"tensors", s.tensors}};
}

json tensor_json(const TensorInfo& t) {
  return {{"dtype", t.dtype},   {"shape", t.shape},           {"stride", t.stride}, {"storage_offset", t.storage_offset},
          {"device", t.device}, {"storage", t.storage_record}, {"role", tensor_role_id(t.role)}};
}

json tensor_change_json(const TensorChange& t) {
  json changes = json::array();
  if (t.dtype_changed) changes.push_back("dtype");
  if (t.shape_changed) changes.push_back("shape");
  if (t.values.compared && t.values.differing > 0) changes.push_back("values");
  if (t.layout_changed) changes.push_back("layout");
  if (t.device_changed) changes.push_back("device");
  json j = {{"path", t.path},
            {"change", change_id(t.change)},
            {"changes", changes},
            {"old", t.change == Change::Added ? json(nullptr) : tensor_json(t.old_tensor)},
            {"new", t.change == Change::Removed ? json(nullptr) : tensor_json(t.new_tensor)}};
  const TensorValueDiff& v = t.values;
  if (v.compared || !v.note.empty()) {
    j["values"] = {{"compared", v.compared},
                   {"elements", v.elements},
                   {"differing", v.differing},
                   {"nonfinite", v.nonfinite},
                   {"max_abs_diff", number_or_null(v.max_abs_diff)},
                   {"max_index", v.max_abs_diff ? json(v.max_index) : json(nullptr)},
                   {"old_value", number_or_null(v.old_value)},
                   {"new_value", number_or_null(v.new_value)},
                   {"note", v.note}};
  }
  return j;
}

}  // namespace

void render_diff_text(const ArchiveDiff& d, std::ostream& out) {
  render_summary(d, out);
  render_records(d, out);
  render_tensors(d, out);
  render_code(d, out);
  render_extra(d, out);
}

json diff_to_json(const ArchiveDiff& d) {
  const Counts records = count(d.records), tensors = count(d.tensors), extra = count(d.extra);
  json summary = {{"records_changed", records.changed},
                  {"records_added", records.added},
                  {"records_removed", records.removed},
                  {"records_compared", d.records_compared},
                  {"records_ignored", d.records_ignored},
                  {"records_equal_by_crc", d.records_equal_by_crc},
                  {"bytes_equal_by_crc", d.bytes_equal_by_crc},
                  {"tensors_compared", d.tensors_compared},
                  {"tensors_changed", tensors.changed},
                  {"tensors_added", tensors.added},
                  {"tensors_removed", tensors.removed},
                  {"tensors_matched", d.tensors_matched},
                  {"max_abs_diff", number_or_null(d.max_abs_diff())},
                  {"code_compared", d.code_compared},
                  {"code_files_changed", d.code.size()},
                  {"extra_changed", extra.changed},
                  {"extra_added", extra.added},
                  {"extra_removed", extra.removed}};
  json records_json = json::array();
  for (const RecordChange& r : d.records) {
    const bool has_old = r.change != Change::Added, has_new = r.change != Change::Removed;
    records_json.push_back({{"name", r.name},
                            {"kind", record_kind_id(r.kind)},
                            {"change", change_id(r.change)},
                            {"old_size", has_old ? json(r.old_size) : json(nullptr)},
                            {"new_size", has_new ? json(r.new_size) : json(nullptr)},
                            {"old_crc32", has_old ? json(r.old_crc32) : json(nullptr)},
                            {"new_crc32", has_new ? json(r.new_crc32) : json(nullptr)},
                            {"same_as_old", r.same_as_old.empty() ? json(nullptr) : json(r.same_as_old)}});
  }
  json tensors_json = json::array();
  for (const TensorChange& t : d.tensors) tensors_json.push_back(tensor_change_json(t));
  json code_json = json::array();
  for (const CodeChange& c : d.code) {
    code_json.push_back({{"record", c.record},
                         {"change", change_id(c.change)},
                         {"text", c.text},
                         {"computed", c.text && c.diff.computed},
                         {"old_lines", c.diff.old_lines},
                         {"new_lines", c.diff.new_lines},
                         {"lines_added", c.diff.lines_added},
                         {"lines_removed", c.diff.lines_removed},
                         {"diff", c.diff.unified}});
  }
  json extra_json = json::array();
  for (const ExtraFileChange& e : d.extra) {
    extra_json.push_back({{"name", e.name},
                          {"change", change_id(e.change)},
                          {"old_size", e.change == Change::Added ? json(nullptr) : json(e.old_size)},
                          {"new_size", e.change == Change::Removed ? json(nullptr) : json(e.new_size)}});
  }
  return {{"schema", "tsarchive.diff/2"},
          {"old", side_json(d.old_side)},
          {"new", side_json(d.new_side)},
          {"same", d.same()},
          {"notes", d.notes},
          {"summary", summary},
          {"records", records_json},
          {"tensors", tensors_json},
          {"code", code_json},
          {"extra", extra_json}};
}

}  // namespace tsarchive::cli
