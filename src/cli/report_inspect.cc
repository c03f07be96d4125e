#include "cli/report_inspect.h"

#include <algorithm>
#include <map>

#include "cli/json_writer.h"
#include "cli/output.h"
#include "cli/report_extra.h"
#include "cli/report_load_safety.h"

namespace tsarchive::cli {
namespace {

using Align = TextTable::Align;

void field(std::ostream& out, const std::string& name, const std::string& value) {
  out << "  " << name << std::string(name.size() < 16 ? 16 - name.size() : 1, ' ') << printable(value) << '\n';
}

void render_archive_fields(const InspectReport& r, std::ostream& out);

// An AOTInductor package is a .pt2 (FileKind::ExportedProgram) whose models
// are compiled code, with no program to headline.
std::string headline(const InspectReport& r) {
  if (r.pt2 && r.pt2->programs.empty() && !r.pt2->aoti.empty()) return "AOTInductor package (.pt2, not TorchScript)";
  return std::string(file_kind_name(r.kind));
}

void render_summary(const InspectReport& r, std::ostream& out) {
  out << printable(r.path) << ": " << headline(r) << '\n';
  for (const std::string& note : r.notes) out << "  note: " << printable(note) << '\n';
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
    // Parameters are what a module declares: a saved object without one (a
    // state_dict, a checkpoint) has tensors and elements, none typed a parameter.
    const bool module = r.kind == FileKind::TorchScript || r.kind == FileKind::LiteInterpreter || r.parameter_count > 0;
    if (module) field(out, "parameters", with_commas(r.parameter_count));
    uint64_t elements = 0;
    for (const DtypeTotal& d : r.dtype_totals) elements += d.elements;
    field(out, "tensors", plural(r.tensors.size(), "tensor") + " in " + plural(r.storages.size(), "storage") + ", " +
                              (module ? "" : with_commas(elements) + " elements, ") + human_size(r.tensor_bytes));
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

// A torch.package archive's own files: what PackageImporter imports (and
// runs) and what load_pickle reads.
void render_package(const TorchPackageInfo& p, std::ostream& out) {
  out << "\nPackage (torch.package.PackageImporter reads it)\n";
  const auto list = [&out](const char* label, const std::vector<std::string>& names) {
    if (names.empty()) return;
    field(out, label, std::to_string(names.size()));
    for (const std::string& name : names) out << "    " << printable(name) << '\n';
  };
  list("modules", p.modules);
  list("extern modules", p.extern_modules);
  list("pickles", p.pickles);
  list("resources", p.resources);
  if (!p.python_version.empty()) field(out, "python version", p.python_version);
  if (p.storages > 0) field(out, "storages", with_commas(p.storages));
  if (p.torchscript > 0) field(out, "torchscript", plural(p.torchscript, "module") + " under .data/ts_code/");
}

// A legacy tar's members, as tarfile lists them (what torch.load reads is the
// last of each name; Loading judges it).
void render_tar_members(const TarListing& tar, std::ostream& out) {
  out << "\nMembers (" << tar.members.size() << ")\n";
  TextTable t({"NAME", "TYPE", "SIZE", "OFFSET"}, {Align::Left, Align::Left, Align::Right, Align::Right});
  t.reserve(tar.members.size());
  for (const TarMember& m : tar.members) {
    const bool link = m.type == '1' || m.type == '2';
    t.add_row({m.name, tar_type_name(m.type) + (link ? " to " + m.linkname : ""), with_commas(m.size),
               with_commas(m.data_offset)});
  }
  t.print(out);
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
    out << "\nMethods of " << printable(c.qualified_name) << " (--code prints the source)\n";
    for (const CodeMethod& m : c.methods) out << "  " << printable(m.signature()) << '\n';
  }
}

void render_problems(const InspectReport& r, std::ostream& out) {
  if (r.problems.empty()) return;
  out << "\nProblems (" << r.problems.size() << ")\n";
  for (const std::string& p : r.problems) out << "  ! " << printable(p) << '\n';
}

template <class W>
void write_method(W& w, const CodeMethod& m) {
  member(w, "name", m.name);
  member(w, "signature", m.signature());
  object_array(w, "parameters", m.parameters, [&](const CodeParameter& p) {
    member(w, "name", p.name);
    member(w, "type", p.type);
    if (!p.default_value.empty()) member(w, "default", p.default_value);
  });
  member(w, "return_type", m.return_type);
}

template <class W>
void write_tar(W& w, const TarListing& tar) {
  object_member(w, "tar", [&] {
    object_array(w, "members", tar.members, [&](const TarMember& m) {
      member(w, "name", m.name);
      member(w, "type", tar_type_name(m.type));
      member(w, "size", m.size);
      member(w, "header_offset", m.header_offset);
      member(w, "data_offset", m.data_offset);
      member(w, "linkname", m.linkname);
    });
    member(w, "anomalies", tar.anomalies);
    member(w, "read_error", tar.read_error);
  });
}

template <class W>
void write_package(W& w, const TorchPackageInfo& p) {
  object_member(w, "package", [&] {
    member(w, "modules", p.modules);
    member(w, "extern_modules", p.extern_modules);
    member(w, "pickles", p.pickles);
    member(w, "resources", p.resources);
    member(w, "python_version", p.python_version);
    member(w, "storages", p.storages);
    member(w, "torchscript_modules", p.torchscript);
  });
}

template <class W>
void write_onnx(W& w, const OnnxInfo& onnx) {
  object_member(w, "onnx", [&] {
    member(w, "ir_version", onnx.ir_version);
    member(w, "producer_name", onnx.producer_name);
    member(w, "producer_version", onnx.producer_version);
    object_array(w, "opsets", onnx.opsets, [&](const std::pair<std::string, int64_t>& opset) {
      member(w, "domain", opset.first);
      member(w, "version", opset.second);
    });
  });
}

template <class W>
void write_record(W& w, const RecordInfo& rec) {
  member(w, "name", rec.name);
  member(w, "kind", record_kind_id(rec.kind));
  member(w, "size", rec.size);
  member(w, "compressed_size", rec.compressed_size);
  member(w, "method", zip_method_name(rec.method));
  member(w, "data_offset", rec.data_offset);
  member(w, "aligned", rec.aligned);
  member(w, "crc32", rec.crc32);
}

template <class W>
void write_run_check(W& w, const RunCheck& c) {
  object_member(w, "run_check", [&] {
    member(w, "method", c.method);
    member(w, "inputs", c.inputs);
    member(w, "outputs", c.outputs);
    member(w, "atol", c.tolerance.atol);
    member(w, "rtol", c.tolerance.rtol);
    member(w, "device", c.device);
    member(w, "libtorch", c.libtorch);
    member(w, "producer", c.producer);
    member(w, "created_at", c.created_at);
  });
}

// "archive", "extra_files" and "run_check": the members of a ZIP file.
template <class W>
void write_zip_members(W& w, const InspectReport& r) {
  object_member(w, "archive", [&] {
    member(w, "top_folder", r.top_folder);
    member(w, "format_version", r.format_version);
    member(w, "version_record", r.version_record);
    member(w, "byteorder", r.byteorder);
    member(w, "serialization_id", r.serialization_id);
    member(w, "bytecode_version", r.bytecode_version);
    member(w, "total_size", r.total_size);
    member(w, "compressed_size", r.compressed_size);
    member(w, "tensor_records", r.tensor_records);
    member(w, "tensor_records_stored", r.tensor_records_stored);
    member(w, "tensor_records_aligned", r.tensor_records_aligned);
    object_array(w, "records", r.records, [&](const RecordInfo& rec) { write_record(w, rec); });
  });
  member(w, "extra_files", extra_files_to_json(r.extra_files));
  member(w, "signature", signature_json(r.signature));
  if (r.run_check) write_run_check(w, *r.run_check);
}

template <class W>
void write_tensor(W& w, const TensorInfo& t) {
  member(w, "path", t.path);
  member(w, "role", tensor_role_id(t.role));
  member(w, "dtype", t.dtype);
  member(w, "shape", t.shape);
  member(w, "stride", t.stride);
  member(w, "storage_offset", t.storage_offset);
  member(w, "device", t.device);
  member(w, "storage", t.storage_record);
  member(w, "numel", t.numel);
  member(w, "nbytes", t.nbytes);
  member(w, "requires_grad", t.requires_grad);
  if (!t.quantization.empty()) member(w, "quantization", t.quantization);
}

// "tensors", "storages" and "dtype_totals".
template <class W>
void write_tensor_members(W& w, const InspectReport& r) {
  object_array(w, "tensors", r.tensors, [&](const TensorInfo& t) { write_tensor(w, t); });
  object_array(w, "storages", r.storages, [&](const StorageInfo& s) {
    member(w, "record", s.record);
    member(w, "dtype", s.dtype);
    member(w, "numel", s.numel);
    member(w, "nbytes", s.nbytes);
    member(w, "device", s.device);
  });
  object_array(w, "dtype_totals", r.dtype_totals, [&](const DtypeTotal& d) {
    member(w, "dtype", d.dtype);
    member(w, "tensors", d.tensors);
    member(w, "elements", d.elements);
    member(w, "bytes", d.bytes);
  });
}

// "modules" and "classes".
template <class W>
void write_code_members(W& w, const InspectReport& r) {
  object_array(w, "modules", r.modules, [&](const ModuleInfo& m) {
    member(w, "path", m.path);
    member(w, "type", m.type);
  });
  object_array(w, "classes", r.classes, [&](const CodeClass& c) {
    member(w, "name", c.qualified_name);
    member(w, "base", c.base);
    member(w, "record", c.record);
    member(w, "parameters", c.parameters);
    member(w, "buffers", c.buffers);
    object_array(w, "methods", c.methods, [&](const CodeMethod& m) { write_method(w, m); });
  });
}

// The document (schema tsarchive.inspect/2), member by member, in its order.
template <class W>
void write_inspect(W& w, const InspectReport& r) {
  w.begin_object();
  member(w, "schema", "tsarchive.inspect/2");
  member(w, "file", r.path);
  member(w, "size", r.file_size);
  member(w, "kind", file_kind_id(r.kind));
  member(w, "kind_description", headline(r));
  member(w, "notes", r.notes);
  member(w, "problems", r.problems);
  if (r.onnx) write_onnx(w, *r.onnx);
  if (r.tar) write_tar(w, *r.tar);
  if (r.is_zip) write_zip_members(w, r);
  if (r.package) write_package(w, *r.package);
  if (r.pt2) member(w, "pt2", pt2_to_json(*r.pt2));
  write_tensor_members(w, r);
  member(w, "parameter_count", r.parameter_count);
  member(w, "tensor_bytes", r.tensor_bytes);
  member(w, "root_type", r.root_type);
  write_code_members(w, r);
  if (r.load_safety) member(w, "load_safety", load_safety_to_json(*r.load_safety));
  w.end_object();
}

}  // namespace

void render_inspect_text(const InspectReport& r, const InspectView& view, std::ostream& out) {
  render_summary(r, out);
  render_records(r, view, out);
  render_extra(r, out);
  if (r.pt2) render_pt2_text(*r.pt2, out);
  if (r.tar) render_tar_members(*r.tar, out);
  if (r.package) render_package(*r.package, out);
  render_tensors(r, out);
  render_modules(r, out);
  render_methods(r, out);
  if (r.load_safety) render_load_safety_text(*r.load_safety, out);
  render_problems(r, out);
}

nlohmann::ordered_json inspect_to_json(const InspectReport& r) {
  JsonBuilder doc;
  write_inspect(doc, r);
  return doc.take();
}

std::string inspect_json_text(const InspectReport& r, int indent) {
  std::string text;
  text.reserve(4096 + 320 * r.tensors.size() + 256 * r.records.size());
  JsonWriter writer(text, indent);
  write_inspect(writer, r);
  writer.flush();
  return text;
}

void write_inspect_json(const InspectReport& r, int indent, std::ostream& out) {
  std::string buffer;
  JsonWriter writer(buffer, indent, out);
  write_inspect(writer, r);
  writer.flush();
}

}  // namespace tsarchive::cli
