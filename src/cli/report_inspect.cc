#include "cli/report_inspect.h"

#include <algorithm>
#include <map>

#include "cli/output.h"
#include "cli/report_extra.h"
#include "cli/report_load_safety.h"

namespace tsarchive::cli {
namespace {

using Align = TextTable::Align;

void field(std::ostream& out, const std::string& name, const std::string& value) {
  out << "  " << name << std::string(name.size() < 16 ? 16 - name.size() : 1, ' ') << shown(value) << '\n';
}

void render_archive_fields(const InspectReport& r, std::ostream& out);

// An AOTInductor package is a .pt2 (FileKind::ExportedProgram) whose models
// are compiled code, with no program to headline.
std::string headline(const InspectReport& r) {
  if (r.pt2 && r.pt2->programs.empty() && !r.pt2->aoti.empty()) return "AOTInductor package (.pt2, not TorchScript)";
  return std::string(file_kind_name(r.kind));
}

void render_summary(const InspectReport& r, std::ostream& out) {
  out << shown(r.path) << ": " << headline(r) << '\n';
  for (const std::string& note : r.notes) out << "  note: " << shown(note) << '\n';
  field(out, "file size", human_size(r.file_size) + " (" + with_commas(r.file_size) + " bytes)");
  if (r.onnx) {
    field(out, "ir version", std::to_string(r.onnx->ir_version));
    field(out, "producer", r.onnx->producer_name + " " + r.onnx->producer_version);
    for (const auto& [domain, version] : r.onnx->opsets) {
      field(out, "opset", (domain.empty() ? std::string("ai.onnx") : domain) + " " + std::to_string(version));
    }
  }
  if (r.is_zip) render_archive_fields(r, out);
  if (r.pt2) {
    field(out, "archive format", r.pt2->archive_format + (r.pt2->archive_version.empty() ? "" : ", version " + r.pt2->archive_version));
    field(out, "programs", plural(r.pt2->programs.size(), "program") + ", " + plural(r.pt2->aoti.size(), "AOTInductor model"));
    if (!r.pt2->programs.empty()) field(out, "parameters", with_commas(r.parameter_count));
  }
  if (!r.tensors.empty() || r.kind == FileKind::TorchScript || r.kind == FileKind::LiteInterpreter) {
    field(out, "parameters", with_commas(r.parameter_count));
    field(out, "tensors", plural(r.tensors.size(), "tensor") + " in " + plural(r.storages.size(), "storage") + ", " +
                              human_size(r.tensor_bytes));
  }
}

// An embedded signature as it names its signer; inspect never verifies it.
std::string signature_text(const EmbeddedSignatureInfo& s, const std::string& path) {
  if (!s.problem.empty()) return s.record + " is not a readable signature: " + s.problem;
  const bool key = s.method == "key";
  return "embedded (" + s.record + ", " + std::to_string(s.records) + " records), " +
         (key ? "key sha256:" + s.key_sha256 : "by " + s.subject + ", issued by " + s.issuer) +
         "; unverified: tsarchive verify " + path + (key ? " --key PUBLIC.pem" : " --certificate-chain ROOTS.pem");
}

nlohmann::ordered_json signature_json(const std::optional<EmbeddedSignatureInfo>& s) {
  if (!s) return nullptr;
  nlohmann::ordered_json doc = {{"record", s->record}, {"verified", false}};
  if (!s->problem.empty()) {
    doc["problem"] = s->problem;
    return doc;
  }
  doc["method"] = s->method;
  if (s->method == "key") {
    doc["key_sha256"] = s->key_sha256;
  } else {
    doc["subject"] = s->subject;
    doc["issuer"] = s->issuer;
  }
  doc["records"] = s->records;
  return doc;
}

void render_archive_fields(const InspectReport& r, std::ostream& out) {
  field(out, "top folder", r.top_folder);
  if (r.format_version) field(out, "format version", std::to_string(*r.format_version) + " (" + r.version_record + ")");
  if (r.bytecode_version) field(out, "bytecode", "version " + std::to_string(*r.bytecode_version));
  if (r.byteorder) field(out, "byteorder", *r.byteorder);
  if (r.serialization_id) field(out, "serialization id", *r.serialization_id);
  field(out, "records", with_commas(r.records.size()) + ", " + human_size(r.total_size) + " (" +
                            human_size(r.compressed_size) + " in the ZIP)");
  if (r.tensor_records > 0) {
    std::string layout;
    if (r.tensor_records_aligned == r.tensor_records) layout = "all stored and 64-byte aligned";
    else layout = with_commas(r.tensor_records - r.tensor_records_stored) + " compressed, " +
                  with_commas(r.tensor_records_stored - r.tensor_records_aligned) + " stored but not 64-byte aligned";
    field(out, "tensor data", plural(r.tensor_records, "record") + ", " + layout);
  }
  if (!r.root_type.empty()) field(out, "root module", r.root_type);
  if (r.signature) field(out, "signature", signature_text(*r.signature, r.path));
  if (r.run_check) {
    const RunCheck& c = *r.run_check;
    field(out, "self-check", c.method + "(" + plural(c.inputs.size(), "input") + ") -> " +
                                 plural(c.outputs.size(), "output") + ", recorded " + c.created_at + " on " + c.device +
                                 "; replay: tsarchive run " + r.path + " --check");
  }
}

void render_records(const InspectReport& r, const InspectView& view, std::ostream& out) {
  if (!r.is_zip) return;
  if (view.records) {
    out << "\nRecords (" << r.records.size() << ")\n";
    TextTable t({"NAME", "KIND", "SIZE", "STORED AS", "METHOD", "OFFSET", "ALIGNED", "CRC32"},
                {Align::Left, Align::Left, Align::Right, Align::Right, Align::Left, Align::Right, Align::Left,
                 Align::Left});
    t.reserve(r.records.size());
    for (const RecordInfo& rec : r.records) {
      char crc[16];
      std::snprintf(crc, sizeof crc, "%08x", rec.crc32);
      t.add_row({rec.name, record_kind_id(rec.kind), with_commas(rec.size),
                 with_commas(rec.compressed_size), zip_method_name(rec.method), with_commas(rec.data_offset),
                 rec.aligned ? "yes" : "no", crc});
    }
    t.print(out);
    return;
  }
  struct Sum {
    uint64_t count = 0, size = 0, compressed = 0;
  };
  std::map<std::string, Sum> kinds;
  for (const RecordInfo& rec : r.records) {
    Sum& s = kinds[std::string(record_kind_id(rec.kind))];
    s.count += 1;
    s.size += rec.size;
    s.compressed += rec.compressed_size;
  }
  out << "\nRecords by kind (--records lists each)\n";
  TextTable t({"KIND", "COUNT", "SIZE", "IN ZIP"}, {Align::Left, Align::Right, Align::Right, Align::Right});
  for (const auto& [kind, s] : kinds) {
    t.add_row({kind, with_commas(s.count), human_size(s.size), human_size(s.compressed)});
  }
  t.print(out);
}

void render_extra(const InspectReport& r, std::ostream& out) {
  if (r.extra_files.empty()) return;
  out << "\nExtra files (" << r.extra_files.size() << "; --extra NAME prints one)\n";
  render_extra_table(r.extra_files, out);
}

void render_tensors(const InspectReport& r, std::ostream& out) {
  if (r.tensors.empty()) return;
  out << "\nTensors (" << r.tensors.size() << ")\n";
  TextTable t({"PATH", "ROLE", "DTYPE", "SHAPE", "ELEMENTS", "SIZE", "DEVICE"},
              {Align::Left, Align::Left, Align::Left, Align::Left, Align::Right, Align::Right, Align::Left});
  t.reserve(r.tensors.size());
  std::string dtype;
  for (const TensorInfo& tensor : r.tensors) {
    dtype = tensor.dtype;
    if (!tensor.quantization.empty()) dtype += " (" + tensor.quantization + ")";
    t.add_row({tensor.path.empty() ? std::string_view("(the saved tensor)") : std::string_view(tensor.path),
               tensor_role_id(tensor.role), dtype, shape_text(tensor.shape), with_commas(tensor.numel),
               human_size(tensor.nbytes), tensor.device});
  }
  t.print(out);

  out << "\nBy dtype\n";
  TextTable d({"DTYPE", "TENSORS", "ELEMENTS", "SIZE"}, {Align::Left, Align::Right, Align::Right, Align::Right});
  for (const DtypeTotal& total : r.dtype_totals) {
    d.add_row({total.dtype, with_commas(total.tensors), with_commas(total.elements), human_size(total.bytes)});
  }
  d.print(out);
}

void render_modules(const InspectReport& r, std::ostream& out) {
  if (r.modules.empty()) return;
  out << "\nModules (" << r.modules.size() << ")\n";
  TextTable t({"MODULE", "TYPE"});
  for (const ModuleInfo& m : r.modules) {
    if (m.path.empty()) {
      t.add_row({"(root)", m.type});
      continue;
    }
    const size_t depth = static_cast<size_t>(std::count(m.path.begin(), m.path.end(), '.')) + 1;
    const size_t dot = m.path.rfind('.');
    t.add_row({std::string(2 * depth, ' ') + (dot == std::string::npos ? m.path : m.path.substr(dot + 1)), m.type});
  }
  t.print(out);
}

void render_methods(const InspectReport& r, std::ostream& out) {
  for (const CodeClass& c : r.classes) {
    if (c.qualified_name != r.root_type) continue;
    out << "\nMethods of " << shown(c.qualified_name) << " (--code prints the source)\n";
    for (const CodeMethod& m : c.methods) out << "  " << shown(m.signature()) << '\n';
  }
}

void render_problems(const InspectReport& r, std::ostream& out) {
  if (r.problems.empty()) return;
  out << "\nProblems (" << r.problems.size() << ")\n";
  for (const std::string& p : r.problems) out << "  ! " << shown(p) << '\n';
}

nlohmann::ordered_json method_json(const CodeMethod& m) {
  nlohmann::ordered_json params = nlohmann::ordered_json::array();
  for (const CodeParameter& p : m.parameters) {
    nlohmann::ordered_json jp = {{"name", p.name}, {"type", p.type}};
    if (!p.default_value.empty()) jp["default"] = p.default_value;
    params.push_back(jp);
  }
  return {{"name", m.name}, {"signature", m.signature()}, {"parameters", params}, {"return_type", m.return_type}};
}

// A new empty object at the end of `array`, with room for `keys` members that
// the caller adds with emplace_back, in order. The objects of the big arrays
// (records, tensors, storages) are built this way: nlohmann's initializer
// lists make a temporary array per key, most of --json's time on an archive
// with thousands of tensors.
nlohmann::ordered_json::object_t& new_object(nlohmann::ordered_json& array, size_t keys) {
  auto& object = array.emplace_back(nlohmann::ordered_json::value_t::object).get_ref<nlohmann::ordered_json::object_t&>();
  object.reserve(keys);
  return object;
}

}  // namespace

void render_inspect_text(const InspectReport& r, const InspectView& view, std::ostream& out) {
  render_summary(r, out);
  render_records(r, view, out);
  render_extra(r, out);
  if (r.pt2) render_pt2_text(*r.pt2, out);
  render_tensors(r, out);
  render_modules(r, out);
  render_methods(r, out);
  if (r.load_safety) render_load_safety_text(*r.load_safety, out);
  render_problems(r, out);
}

nlohmann::ordered_json inspect_to_json(const InspectReport& r) {
  using json = nlohmann::ordered_json;
  json doc = {{"schema", "tsarchive.inspect/2"},
              {"file", r.path},
              {"size", r.file_size},
              {"kind", file_kind_id(r.kind)},
              {"kind_description", headline(r)},
              {"notes", r.notes},
              {"problems", r.problems}};
  if (r.onnx) {
    json opsets = json::array();
    for (const auto& [domain, version] : r.onnx->opsets) opsets.push_back({{"domain", domain}, {"version", version}});
    doc["onnx"] = {{"ir_version", r.onnx->ir_version},
                   {"producer_name", r.onnx->producer_name},
                   {"producer_version", r.onnx->producer_version},
                   {"opsets", std::move(opsets)}};
  }
  if (r.is_zip) {
    json records = json::array();
    records.get_ref<json::array_t&>().reserve(r.records.size());
    for (const RecordInfo& rec : r.records) {
      auto& o = new_object(records, 8);
      o.emplace_back("name", rec.name);
      o.emplace_back("kind", record_kind_id(rec.kind));
      o.emplace_back("size", rec.size);
      o.emplace_back("compressed_size", rec.compressed_size);
      o.emplace_back("method", zip_method_name(rec.method));
      o.emplace_back("data_offset", rec.data_offset);
      o.emplace_back("aligned", rec.aligned);
      o.emplace_back("crc32", rec.crc32);
    }
    doc["archive"] = {{"top_folder", r.top_folder},
                      {"format_version", r.format_version ? json(*r.format_version) : json(nullptr)},
                      {"version_record", r.version_record},
                      {"byteorder", r.byteorder ? json(*r.byteorder) : json(nullptr)},
                      {"serialization_id", r.serialization_id ? json(*r.serialization_id) : json(nullptr)},
                      {"bytecode_version", r.bytecode_version ? json(*r.bytecode_version) : json(nullptr)},
                      {"total_size", r.total_size},
                      {"compressed_size", r.compressed_size},
                      {"tensor_records", r.tensor_records},
                      {"tensor_records_stored", r.tensor_records_stored},
                      {"tensor_records_aligned", r.tensor_records_aligned},
                      {"records", std::move(records)}};
    doc["extra_files"] = extra_files_to_json(r.extra_files);
    doc["signature"] = signature_json(r.signature);
    if (r.run_check) {
      const RunCheck& c = *r.run_check;
      doc["run_check"] = {{"method", c.method}, {"inputs", c.inputs},   {"outputs", c.outputs},
                          {"atol", c.tolerance.atol}, {"rtol", c.tolerance.rtol}, {"device", c.device},
                          {"libtorch", c.libtorch}, {"producer", c.producer}, {"created_at", c.created_at}};
    }
  }
  json tensors = json::array();
  tensors.get_ref<json::array_t&>().reserve(r.tensors.size());
  for (const TensorInfo& t : r.tensors) {
    auto& o = new_object(tensors, 12);
    o.emplace_back("path", t.path);
    o.emplace_back("role", tensor_role_id(t.role));
    o.emplace_back("dtype", t.dtype);
    o.emplace_back("shape", t.shape);
    o.emplace_back("stride", t.stride);
    o.emplace_back("storage_offset", t.storage_offset);
    o.emplace_back("device", t.device);
    o.emplace_back("storage", t.storage_record);
    o.emplace_back("numel", t.numel);
    o.emplace_back("nbytes", t.nbytes);
    o.emplace_back("requires_grad", t.requires_grad);
    if (!t.quantization.empty()) o.emplace_back("quantization", t.quantization);
  }
  json storages = json::array();
  storages.get_ref<json::array_t&>().reserve(r.storages.size());
  for (const StorageInfo& s : r.storages) {
    auto& o = new_object(storages, 5);
    o.emplace_back("record", s.record);
    o.emplace_back("dtype", s.dtype);
    o.emplace_back("numel", s.numel);
    o.emplace_back("nbytes", s.nbytes);
    o.emplace_back("device", s.device);
  }
  json totals = json::array();
  for (const DtypeTotal& d : r.dtype_totals) {
    totals.push_back({{"dtype", d.dtype}, {"tensors", d.tensors}, {"elements", d.elements}, {"bytes", d.bytes}});
  }
  json modules = json::array();
  for (const ModuleInfo& m : r.modules) modules.push_back({{"path", m.path}, {"type", m.type}});
  json classes = json::array();
  for (const CodeClass& c : r.classes) {
    json methods = json::array();
    for (const CodeMethod& m : c.methods) methods.push_back(method_json(m));
    classes.push_back({{"name", c.qualified_name}, {"base", c.base}, {"record", c.record},
                       {"parameters", c.parameters}, {"buffers", c.buffers}, {"methods", std::move(methods)}});
  }
  if (r.pt2) doc["pt2"] = pt2_to_json(*r.pt2);
  doc["tensors"] = std::move(tensors);
  doc["storages"] = std::move(storages);
  doc["dtype_totals"] = std::move(totals);
  doc["parameter_count"] = r.parameter_count;
  doc["tensor_bytes"] = r.tensor_bytes;
  doc["root_type"] = r.root_type;
  doc["modules"] = std::move(modules);
  doc["classes"] = std::move(classes);
  if (r.load_safety) doc["load_safety"] = load_safety_to_json(*r.load_safety);
  return doc;
}

}  // namespace tsarchive::cli
