// Two TorchScript archives compared (what is compared, and how, is in diff.h).
#include "core/compare/diff.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <zlib.h>

#include "base/error.h"
#include "base/utf8.h"
#include "core/inspect/inspect.h"
#include "core/inspect/pt2_graph.h"
#include "core/provenance/verify.h"
#include "format/pt2.h"

namespace tsarchive {

std::string_view change_id(Change change) {
  switch (change) {
    case Change::Added: return "added";
    case Change::Removed: return "removed";
    case Change::Changed: return "changed";
  }
  return "changed";
}

std::optional<double> ArchiveDiff::max_abs_diff() const {
  std::optional<double> max;
  for (const TensorChange& t : tensors) {
    if (t.values.max_abs_diff && (!max || *t.values.max_abs_diff > *max)) max = t.values.max_abs_diff;
  }
  return max;
}

namespace {

constexpr uint64_t kChunk = 1ull << 20;
constexpr const char* kRefusal = "cannot diff this file";

// Stored with honest sizes: its bytes can be read straight from the file.
bool plain_stored(const ZipEntry& e) { return e.stored() && e.compressed_size == e.uncompressed_size; }

enum class Equality { Equal, EqualByCrc, Different };

// Two records with the same size and CRC-32 but other bytes: one of them
// does not hold what its CRC-32 says. That is damage, not a change: it is
// reported as such, naming the record and the file.
void throw_if_damaged(const TorchArchive& a, const Record& ra, const TorchArchive& b, const Record& rb) {
  const auto crc_ok = [](const TorchArchive& t, const Record& r) {
    const ZipEntry& e = *r.entry;
    uLong crc = ::crc32(0L, Z_NULL, 0);
    for (uint64_t at = 0; at < e.uncompressed_size; at += kChunk) {
      const size_t n = static_cast<size_t>(std::min(kChunk, e.uncompressed_size - at));
      const std::string bytes = t.zip().source().read_string(e.data_offset + at, n);
      crc = ::crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size()));
    }
    return static_cast<uint32_t>(crc) == e.crc32;
  };
  const bool a_ok = crc_ok(a, ra);
  if (a_ok && crc_ok(b, rb)) return;  // a CRC-32 collision: both intact, they differ
  const TorchArchive& damaged = a_ok ? b : a;
  const Record& record = a_ok ? rb : ra;
  throw Error(ErrorKind::BadInput,
              "the archive is damaged: record '" + record.name + "' does not match its CRC-32 (" +
                  std::to_string(record.entry->uncompressed_size) + " bytes)",
              damaged.path(), "run 'tsarchive verify' on it; re-export it or fetch it again");
}

// Size and CRC-32 first; then the bytes, when affordable (diff.h).
Equality compare_record(const TorchArchive& a, const Record& ra, const TorchArchive& b, const Record& rb,
                        uint64_t limit) {
  const ZipEntry& ea = *ra.entry;
  const ZipEntry& eb = *rb.entry;
  if (ea.uncompressed_size != eb.uncompressed_size || ea.crc32 != eb.crc32) return Equality::Different;
  const uint64_t size = ea.uncompressed_size;
  if (size > limit) return Equality::EqualByCrc;
  if (plain_stored(ea) && plain_stored(eb)) {
    for (uint64_t at = 0; at < size; at += kChunk) {
      const size_t n = static_cast<size_t>(std::min(kChunk, size - at));
      if (a.zip().source().read_string(ea.data_offset + at, n) != b.zip().source().read_string(eb.data_offset + at, n)) {
        throw_if_damaged(a, ra, b, rb);  // same size and CRC-32, other bytes
        return Equality::Different;
      }
    }
    return Equality::Equal;
  }
  if (size > DiffOptions::kInflateCompareLimit) return Equality::EqualByCrc;
  return a.read(ra, size) == b.read(rb, size) ? Equality::Equal : Equality::Different;
}

// A record of the new archive (Added), the old one (Removed), or both (Changed).
RecordChange record_change(Change change, const Record* old_record, const Record* new_record) {
  RecordChange c;
  c.change = change;
  c.name = (old_record != nullptr ? old_record : new_record)->name;
  c.kind = (new_record != nullptr ? new_record : old_record)->kind;
  if (old_record != nullptr) {
    c.old_size = old_record->entry->uncompressed_size;
    c.old_crc32 = old_record->entry->crc32;
  }
  if (new_record != nullptr) {
    c.new_size = new_record->entry->uncompressed_size;
    c.new_crc32 = new_record->entry->crc32;
  }
  return c;
}

bool holds_tensor_data(RecordKind kind) { return kind == RecordKind::TensorData || kind == RecordKind::ConstantData; }

// A tensor added or removed before others shifts their storage keys
// (data/3 becomes data/4): marks new tensor records whose size and CRC-32
// an old tensor record of another name has.
void find_renumbered_storages(const TorchArchive& a, std::vector<RecordChange>& records) {
  std::unordered_map<uint64_t, std::vector<const Record*>> old_by_crc;
  for (const Record& r : a.records()) {
    if (holds_tensor_data(r.kind)) old_by_crc[r.entry->crc32].push_back(&r);
  }
  for (RecordChange& c : records) {
    if (c.change == Change::Removed || !holds_tensor_data(c.kind)) continue;
    const auto found = old_by_crc.find(c.new_crc32);
    if (found == old_by_crc.end()) continue;
    for (const Record* r : found->second) {
      if (r->name != c.name && r->entry->uncompressed_size == c.new_size) {
        c.same_as_old = r->name;
        break;
      }
    }
  }
}

// Fills out.records; returns the names whose content is the same in both.
// The names DiffOptions::ignore_stamp and ignore_extra leave out, from both archives.
std::set<std::string> ignored_records(const TorchArchive& a, const TorchArchive& b, const DiffOptions& options) {
  std::set<std::string> ignored;
  for (const TorchArchive* archive : {&a, &b}) {
    if (options.ignore_stamp) {
      if (const Record* stamp = locate_stamp(*archive).stamp) ignored.insert(stamp->name);
    }
    if (!options.ignore_extra) continue;
    for (const Record& r : archive->records()) {
      if (r.kind == RecordKind::Extra) ignored.insert(r.name);
    }
  }
  return ignored;
}

std::unordered_set<std::string> diff_records(const TorchArchive& a, const TorchArchive& b, const DiffOptions& options,
                                             ArchiveDiff& out) {
  const std::set<std::string> ignored = ignored_records(a, b, options);
  out.records_ignored.assign(ignored.begin(), ignored.end());
  std::unordered_set<std::string> unchanged;
  std::vector<std::string_view> common_in_old_order;
  for (const Record& r : a.records()) {
    if (ignored.count(r.name) != 0) continue;
    const Record* s = b.find(r.name);
    if (s == nullptr) {
      out.records.push_back(record_change(Change::Removed, &r, nullptr));
      continue;
    }
    ++out.records_compared;
    common_in_old_order.push_back(r.name);
    const Equality eq = compare_record(a, r, b, *s, options.byte_compare_limit);
    if (eq == Equality::Different) {
      out.records.push_back(record_change(Change::Changed, &r, s));
      continue;
    }
    if (eq == Equality::EqualByCrc) {
      ++out.records_equal_by_crc;
      out.bytes_equal_by_crc += r.entry->uncompressed_size;
    }
    unchanged.insert(r.name);
  }
  size_t next_common = 0;
  bool reordered = false;
  for (const Record& r : b.records()) {
    if (ignored.count(r.name) != 0) continue;
    if (a.find(r.name) == nullptr) {
      out.records.push_back(record_change(Change::Added, nullptr, &r));
    } else {
      reordered = reordered || common_in_old_order[next_common] != r.name;
      ++next_common;
    }
  }
  if (reordered) out.notes.push_back("the records are in a different order (not a change)");
  find_renumbered_storages(a, out.records);
  return unchanged;
}

bool big_endian(const TorchArchive& archive) {
  const std::optional<std::string> order = archive.read_optional("byteorder", ReadLimits::kSmall);
  return order && order->rfind("big", 0) == 0;
}

// The bytes of a storage record, or why they cannot be had.
std::optional<StorageBytes> open_storage(const TorchArchive& archive, const std::string& name, const char* side,
                                         std::string& why) {
  const Record* r = archive.find(name);
  if (r == nullptr) {
    why = "its storage record '" + name + "' is missing from the " + side + " archive";
    return std::nullopt;
  }
  if (plain_stored(*r->entry)) return StorageBytes(archive.zip().source(), r->entry->data_offset, r->entry->uncompressed_size);
  if (r->entry->uncompressed_size > DiffOptions::kInflateCompareLimit) {
    why = "its storage record '" + name + "' in the " + side + " archive is compressed and larger than " +
          std::to_string(DiffOptions::kInflateCompareLimit >> 20) + " MiB";
    return std::nullopt;
  }
  return StorageBytes(archive.read(*r, DiffOptions::kInflateCompareLimit));
}

TensorValueDiff compare_values(const TorchArchive& a, const TensorInfo& ta, const TorchArchive& b, const TensorInfo& tb,
                               bool values_readable) {
  TensorValueDiff values;
  if (!values_readable) {
    values.note = "a big-endian archive: values are not compared";
    return values;
  }
  std::optional<StorageBytes> sa = open_storage(a, ta.storage_record, "old", values.note);
  if (!sa) return values;
  std::optional<StorageBytes> sb = open_storage(b, tb.storage_record, "new", values.note);
  if (!sb) return values;
  try {
    return compare_tensor_values(ta, *sa, tb, *sb);
  } catch (const Error& e) {
    throw Error(e.kind(), "tensor '" + ta.path + "': " + e.what(), e.file(), e.hint());
  }
}

TensorChange tensor_change(Change change, const TensorInfo* old_tensor, const TensorInfo* new_tensor) {
  TensorChange c;
  c.path = old_tensor != nullptr ? old_tensor->path : new_tensor->path;
  c.change = change;
  if (old_tensor != nullptr) c.old_tensor = *old_tensor;
  if (new_tensor != nullptr) c.new_tensor = *new_tensor;
  return c;
}

// What the pickle walk could not make sense of: without this, a tensor the
// reader had to skip would read as a tensor removed.
void note_problems(const ModelContents& model, const std::string& side, std::vector<std::string>& notes) {
  constexpr size_t kShown = 5;
  for (size_t i = 0; i < model.problems.size() && i < kShown; ++i) {
    notes.push_back("the " + side + " archive: " + model.problems[i]);
  }
  if (model.problems.size() > kShown) {
    notes.push_back("the " + side + " archive: " + std::to_string(model.problems.size() - kShown) +
                    " more problems; 'tsarchive inspect' lists them");
  }
}

void diff_tensors(const TorchArchive& a, const TorchArchive& b, const std::unordered_set<std::string>& unchanged,
                  ArchiveDiff& out) {
  const ModelContents old_model = archive_tensors(a);
  const ModelContents new_model = archive_tensors(b);
  note_problems(old_model, "old", out.notes);
  note_problems(new_model, "new", out.notes);
  out.tensors_compared = true;
  out.old_side.tensors = old_model.tensors.size();
  out.new_side.tensors = new_model.tensors.size();
  const bool values_readable = !big_endian(a) && !big_endian(b);
  std::unordered_map<std::string_view, const TensorInfo*> old_by_path, new_by_path;
  for (const TensorInfo& t : old_model.tensors) old_by_path.emplace(t.path, &t);
  for (const TensorInfo& t : new_model.tensors) new_by_path.emplace(t.path, &t);

  for (const TensorInfo& ta : old_model.tensors) {
    if (old_by_path.at(ta.path) != &ta) continue;  // a path seen twice; the first one counts
    const auto found = new_by_path.find(ta.path);
    if (found == new_by_path.end()) {
      out.tensors.push_back(tensor_change(Change::Removed, &ta, nullptr));
      continue;
    }
    const TensorInfo& tb = *found->second;
    ++out.tensors_matched;
    TensorChange c = tensor_change(Change::Changed, &ta, &tb);
    c.dtype_changed = ta.dtype != tb.dtype || ta.quantization != tb.quantization;
    c.shape_changed = ta.shape != tb.shape;
    c.layout_changed = ta.stride != tb.stride || ta.storage_offset != tb.storage_offset;
    c.device_changed = ta.device != tb.device;
    if (c.dtype_changed || c.shape_changed) {
      out.tensors.push_back(std::move(c));
      continue;
    }
    if (!c.layout_changed && ta.storage_record == tb.storage_record && unchanged.count(ta.storage_record) > 0) {
      ++out.tensors_unread;
      if (c.device_changed) out.tensors.push_back(std::move(c));
      continue;
    }
    c.values = compare_values(a, ta, b, tb, values_readable);
    const bool equal = c.values.compared && c.values.differing == 0;
    if (!equal || c.layout_changed || c.device_changed) out.tensors.push_back(std::move(c));
  }
  for (const TensorInfo& tb : new_model.tensors) {
    if (new_by_path.at(tb.path) == &tb && old_by_path.count(tb.path) == 0) {
      out.tensors.push_back(tensor_change(Change::Added, nullptr, &tb));
    }
  }
}

bool is_python_code(const RecordChange& r) {
  return r.kind == RecordKind::Code && r.name.size() > 3 && r.name.compare(r.name.size() - 3, 3, ".py") == 0;
}

// A .pt2 program's JSON is one long line: its change is shown as the change of
// its graph as inspect --graph prints it (pt2_graph.h), one line per node.
std::string program_text(const TorchArchive& archive, const std::string& name) {
  return pt2_method_graph(archive, name).text;
}

void diff_programs(const TorchArchive& a, const TorchArchive& b, const DiffOptions& options, ArchiveDiff& out) {
  for (const RecordChange& r : out.records) {
    const std::optional<std::string> program = r.kind == RecordKind::Program ? pt2_program_of(r.name) : std::nullopt;
    if (!program) continue;  // not a program PyTorch reads
    const std::string& name = *program;
    CodeChange c;
    c.record = r.name;
    c.change = r.change;
    const std::string old_text = r.change == Change::Added ? "" : program_text(a, name);
    const std::string new_text = r.change == Change::Removed ? "" : program_text(b, name);
    c.diff = diff_text(old_text, new_text, r.change == Change::Added ? "/dev/null" : "a/" + r.name + " (graph)",
                       r.change == Change::Removed ? "/dev/null" : "b/" + r.name + " (graph)", options.text);
    out.code.push_back(std::move(c));
  }
}

void diff_code(const TorchArchive& a, const TorchArchive& b, const DiffOptions& options, ArchiveDiff& out) {
  out.code_compared = true;
  if (a.kind() == FileKind::ExportedProgram || b.kind() == FileKind::ExportedProgram) {
    diff_programs(a, b, options, out);
  }
  for (const RecordChange& r : out.records) {
    if (!is_python_code(r)) continue;
    CodeChange c;
    c.record = r.name;
    c.change = r.change;
    const std::string old_text = r.change == Change::Added ? "" : a.read(*a.find(r.name), ReadLimits::kCode);
    const std::string new_text = r.change == Change::Removed ? "" : b.read(*b.find(r.name), ReadLimits::kCode);
    c.text = is_printable_utf8(old_text) && is_printable_utf8(new_text);
    if (c.text) {
      c.diff = diff_text(old_text, new_text, r.change == Change::Added ? "/dev/null" : "a/" + r.name,
                         r.change == Change::Removed ? "/dev/null" : "b/" + r.name, options.text);
    }
    out.code.push_back(std::move(c));
  }
}

DiffSide side_of(const TorchArchive& archive) {
  return DiffSide{archive.path(), archive.kind(), archive.top_folder(), archive.zip().source().size(),
                  archive.records().size(), 0};
}

}  // namespace

ArchiveDiff diff_archives(const TorchArchive& a, const TorchArchive& b, const DiffOptions& options) {
  ArchiveDiff out;
  out.old_side = side_of(a);
  out.new_side = side_of(b);
  if (a.top_folder() != b.top_folder()) {
    out.notes.push_back("the top folders differ ('" + a.top_folder() + "' and '" + b.top_folder() +
                        "'): records are compared by their names below them (not a change)");
  }
  if (a.kind() != b.kind()) {
    out.notes.push_back("the old file is a " + std::string(file_kind_name(a.kind())) + ", the new one a " +
                        std::string(file_kind_name(b.kind())));
  }
  const std::unordered_set<std::string> unchanged = diff_records(a, b, options, out);
  if (options.tensors) diff_tensors(a, b, unchanged, out);
  if (options.code) diff_code(a, b, options, out);
  for (const RecordChange& r : out.records) {
    if (r.kind == RecordKind::Extra) out.extra.push_back(ExtraFileChange{r.name.substr(kExtraFolder.size()), r.change, r.old_size, r.new_size});
  }
  return out;
}

ArchiveDiff diff_files(const std::string& old_path, const std::string& new_path, const DiffOptions& options) {
  const auto a = open_torchscript_archive(open_file_source(old_path), kRefusal, true);
  const auto b = open_torchscript_archive(open_file_source(new_path), kRefusal, true);
  return diff_archives(*a, *b, options);
}

}  // namespace tsarchive
