#include "cli/report_verify.h"

#include "base/build_info.h"
#include "cli/output.h"

namespace tsarchive::cli {
namespace {

std::string short_hex(const std::string& hex) { return hex.size() > 16 ? hex.substr(0, 16) + "..." : hex; }

void print_names(std::ostream& out, const char* label, const std::vector<std::string>& names) {
  constexpr size_t kShown = 20;
  const std::string padded = std::string(label) + std::string(10 - std::string_view(label).size(), ' ');
  for (size_t i = 0; i < names.size() && i < kShown; ++i) out << "  " << padded << printable(names[i]) << '\n';
  if (names.size() > kShown) out << "  " << padded << "... and " << names.size() - kShown << " more\n";
}

// " (tensor encoder.0.weight)", " (tensors a, b and 3 more)", or "" for a
// record that holds no tensor data.
std::string tensors_behind(const StampCheck& s, const std::string& record) {
  const auto found = s.changed_tensors.find(record);
  if (found == s.changed_tensors.end()) return "";
  constexpr size_t kShown = 3;
  const std::vector<std::string>& paths = found->second;
  std::string text = paths.size() == 1 ? " (tensor " : " (tensors ";
  for (size_t i = 0; i < paths.size() && i < kShown; ++i) text += (i == 0 ? "" : ", ") + paths[i];
  if (paths.size() > kShown) text += " and " + std::to_string(paths.size() - kShown) + " more";
  return text + ")";
}

std::string headline(const VerifyReport& r) {
  switch (r.outcome()) {
    case VerifyOutcome::Intact:
      if (r.stamp && r.stamp->stamp.has_digests) return "intact, matches its stamp";
      return !r.stamp && r.producer_info ? "intact; not stamped by tsarchive; producer info present" : "intact";
    case VerifyOutcome::Mismatch:
      return r.stamp && !r.stamp->problem.empty() ? "STAMP UNREADABLE" : "CHANGED since it was stamped";
    case VerifyOutcome::Malformed:
      return "DAMAGED";
    case VerifyOutcome::Unreadable:
      return r.kind == FileKind::ExportedProgram ? "intact, but not readable by torch.export.load"
                                                 : "intact, but not readable by this libtorch";
  }
  return "";
}

// The first line when the signature fails: the records may still be whole.
std::string headline_signature_fails(const VerifyReport& r) {
  switch (r.outcome()) {
    case VerifyOutcome::Intact:
      return r.stamp && r.stamp->stamp.has_digests ? "SIGNATURE FAILS; the records are intact and match their stamp"
                                                   : "SIGNATURE FAILS; the records are intact";
    case VerifyOutcome::Unreadable:
      return "SIGNATURE FAILS; the records are " + headline(r);
    case VerifyOutcome::Mismatch:
    case VerifyOutcome::Malformed:
      break;
  }
  return headline(r);
}

}  // namespace

std::string_view verify_outcome_id(VerifyOutcome outcome) {
  switch (outcome) {
    case VerifyOutcome::Intact: return "intact";
    case VerifyOutcome::Mismatch: return "mismatch";
    case VerifyOutcome::Malformed: return "malformed";
    case VerifyOutcome::Unreadable: return "unreadable";
  }
  return "malformed";
}

namespace {

// The first line when loading it would run what the verdict names: the records may still be whole.
std::string headline_unsafe(const VerifyReport& r, bool signature_fails) {
  const char* unsafe = signature_fails ? "UNSAFE to load, and the SIGNATURE FAILS; " : "UNSAFE to load; ";
  if (r.outcome() != VerifyOutcome::Intact) return unsafe + headline(r);
  return std::string(unsafe) + (r.stamp && r.stamp->stamp.has_digests ? "the records are intact and match their stamp"
                                                                      : "the records are intact");
}

}  // namespace

void render_verify_text(const VerifyReport& r, bool loaded, std::ostream& out, bool signature_fails, bool unsafe) {
  out << printable(r.path) << ": "
      << (unsafe ? headline_unsafe(r, signature_fails) : signature_fails ? headline_signature_fails(r) : headline(r))
      << '\n';
  size_t crc_ok = 0;
  for (const RecordDigest& d : r.records) crc_ok += d.crc_ok ? 1 : 0;
  out << "  records   " << r.records.size() << ", " << human_size(r.bytes_hashed) << (r.sha256 ? " hashed; " : " read; ")
      << crc_ok << " of " << r.records.size() << " match their CRC-32\n";
  if (r.format_version) {
    out << "  version   " << *r.format_version;
    if (r.bytecode_version) out << ", bytecode " << *r.bytecode_version;
    if (r.readable) out << " (libtorch " << r.readable->libtorch << " reads " << r.readable->min_format << " to " << r.readable->max_format << ")";
    out << '\n';
  }
  for (const std::string& p : r.problems) out << "  problem   " << printable(p) << '\n';
  if (r.producer_info) out << "  producer  extra/" << kStampName << " (the producer's own; tsarchive leaves it as it is)\n";
  const char* reader = r.kind == FileKind::ExportedProgram ? "  pytorch   cannot read it: " : "  libtorch  cannot read it: ";
  for (const std::string& u : r.unreadable) out << reader << printable(u) << '\n';
  if (r.stamp) {
    const StampCheck& s = *r.stamp;
    if (r.stamp_record != kStampRecord) out << "  stamp in  " << r.stamp_record << '\n';
    if (!s.problem.empty()) {
      out << "  stamp     unreadable: " << printable(s.problem) << '\n';
    } else {
      out << "  stamp     " << (s.stamp.created_at.empty() ? "undated" : printable(s.stamp.created_at)) << " by "
          << printable(s.stamp.producer) << '\n';
      if (s.stamp.has_digests) {
        out << "  root      " << short_hex(s.stamp.root) << (s.root_matches ? " (matches)" : " (differs)") << '\n';
      }
      std::vector<std::string> changed;
      for (const std::string& name : s.changed) changed.push_back(name + tensors_behind(s, name));
      print_names(out, "changed", changed);
      print_names(out, "missing", s.missing);
      print_names(out, "added", s.added);
    }
  }
  if (loaded) out << "  libtorch  loads it\n";
  for (const std::string& n : r.notes) out << "  note      " << printable(n) << '\n';
}

nlohmann::ordered_json stamp_summary_to_json(const ParsedStamp& s) {
  nlohmann::ordered_json j = {{"created_at", s.created_at}, {"producer", s.producer}, {"has_digests", s.has_digests}};
  if (s.has_digests) {
    j["records"] = s.digests.size();
    j["root"] = s.root;
  }
  return j;
}

nlohmann::ordered_json verify_to_json(const VerifyReport& r, bool loaded) {
  nlohmann::ordered_json doc = {{"schema", "tsarchive.verify/1"},
                                {"file", r.path},
                                {"outcome", verify_outcome_id(r.outcome())},
                                {"kind", file_kind_id(r.kind)},
                                {"top_folder", r.top_folder},
                                {"size", r.file_size}};
  doc["format_version"] = r.format_version ? nlohmann::ordered_json(*r.format_version) : nlohmann::ordered_json();
  if (r.bytecode_version) doc["bytecode_version"] = *r.bytecode_version;
  doc["problems"] = r.problems;
  doc["unreadable"] = r.unreadable;
  nlohmann::ordered_json records = nlohmann::ordered_json::array();
  for (const RecordDigest& d : r.records) {
    nlohmann::ordered_json j = {{"name", d.name}, {"size", d.size}, {"sha256", d.sha256}, {"crc_ok", d.crc_ok}};
    if (!d.problem.empty()) j["problem"] = d.problem;
    records.push_back(std::move(j));
  }
  doc["records"] = std::move(records);
  if (r.stamp) {
    const StampCheck& s = *r.stamp;
    nlohmann::ordered_json j = {{"readable", s.problem.empty()}};
    if (!s.problem.empty()) j["problem"] = s.problem;
    if (s.problem.empty()) {
      j.update(stamp_summary_to_json(s.stamp));
      j["matches"] = s.matches();
      if (s.stamp.has_digests) j["root_matches"] = s.root_matches;
      j["changed"] = s.changed;
      j["changed_tensors"] = s.changed_tensors;
      j["missing"] = s.missing;
      j["added"] = s.added;
    }
    j["record"] = r.stamp_record;
    doc["stamp"] = std::move(j);
  } else {
    doc["stamp"] = nullptr;
  }
  doc["producer_info"] = r.producer_info ? nlohmann::ordered_json(extra_record_name(kStampName)) : nlohmann::ordered_json();
  doc["loaded"] = loaded;
  doc["notes"] = r.notes;
  return doc;
}

}  // namespace tsarchive::cli
