// The .pt2 part of `inspect`: programs (signature, symbolic dimensions,
// parameters, buffers and constants with their records), AOTInductor models,
// sample inputs. Text for people, JSON for machines (in tsarchive.inspect/2).
#include <map>

#include "cli/output.h"
#include "cli/report_inspect.h"

namespace tsarchive::cli {
namespace {

using Align = TextTable::Align;
using json = nlohmann::ordered_json;

std::string dims_text(const std::vector<Pt2Dim>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + dims[i].text();
  return out + "]";
}

std::string bytes_text(const std::optional<uint64_t>& bytes) { return bytes ? human_size(*bytes) : "-"; }

std::string arg_type(const Pt2Arg& a) {
  if (a.tensor) return a.tensor->dtype + " " + dims_text(a.tensor->sizes);
  return a.value_type + (a.value_text.empty() ? "" : " " + a.value_text);
}

// A parameter, buffer or constant: its input spec and the payload holding it.
struct Payload {
  const Pt2Arg* spec = nullptr;
  const Pt2Payload* payload = nullptr;
};

std::vector<Payload> payloads_of(const Pt2Program& p) {
  std::map<std::string, const Pt2Payload*> by_name;
  for (const Pt2Payload& w : p.weights) by_name.emplace(w.name, &w);
  for (const Pt2Payload& c : p.constants) by_name.emplace(c.name, &c);
  std::vector<Payload> out;
  for (const Pt2Arg& a : p.inputs) {
    if (a.kind != "parameter" && a.kind != "buffer" && a.kind != "tensor_constant" && a.kind != "custom_obj") continue;
    const auto it = by_name.find(a.target);
    out.push_back(Payload{&a, it == by_name.end() ? nullptr : it->second});
    if (it != by_name.end()) by_name.erase(it);
  }
  for (const auto& [name, payload] : by_name) out.push_back(Payload{nullptr, payload});  // in a config only
  return out;
}

std::string role_of(const Payload& p) {
  if (p.spec == nullptr) return p.payload->is_param ? "parameter" : "unused";
  if (p.spec->kind == "buffer" && p.spec->persistent == false) return "buffer (non-persistent)";
  return p.spec->kind == "tensor_constant" ? "constant" : p.spec->kind;
}

void render_program(const Pt2Program& p, std::ostream& out) {
  std::string about = p.record;
  if (!p.torch_version.empty()) about += ", torch " + p.torch_version;
  if (p.schema_major) about += ", schema " + std::to_string(*p.schema_major) + "." + std::to_string(p.schema_minor.value_or(0));
  for (const auto& [name, version] : p.opsets) about += ", " + name + " opset " + std::to_string(version);
  out << "\nProgram " << printable(p.name) << " (" << printable(about) << "; " << plural(p.nodes, "node") << ", "
      << plural(p.operators.size(), "distinct target") << ")\n";
  // Inputs: what the caller passes (parameters, buffers and constants are
  // listed below); outputs: all of them, a mutated buffer named as such.
  const auto table = [&out](const char* title, const std::vector<Pt2Arg>& args, bool inputs) {
    TextTable t({"NAME", "TYPE", "DEVICE", "SIZE"}, {Align::Left, Align::Left, Align::Left, Align::Right});
    for (const Pt2Arg& a : args) {
      if (inputs && a.kind != "user_input" && a.kind != "constant_input" && a.kind != "token") continue;
      std::string type = arg_type(a);
      if (a.kind != "user_input" && a.kind != "user_output") type += " (" + a.kind + (a.target.empty() ? "" : " " + a.target) + ")";
      t.add_row({a.name, type, a.tensor ? a.tensor->device : "", a.tensor ? bytes_text(a.tensor->nbytes) : ""});
    }
    out << "  " << title << '\n';
    t.print(out, 4);
  };
  table("Inputs", p.inputs, true);
  table("Outputs", p.outputs, false);
  if (!p.ranges.empty()) {
    out << "  Symbolic dimensions\n";
    TextTable t({"SYMBOL", "MIN", "MAX"}, {Align::Left, Align::Right, Align::Right});
    for (const Pt2Range& r : p.ranges) {
      t.add_row({r.symbol, r.min ? std::to_string(*r.min) : "-inf", r.max ? std::to_string(*r.max) : "inf"});
    }
    t.print(out, 4);
  }
  const std::vector<Payload> payloads = payloads_of(p);
  if (payloads.empty()) return;
  out << "  Parameters, buffers and constants (" << payloads.size() << ")\n";
  TextTable t({"NAME", "ROLE", "DTYPE", "SHAPE", "SIZE", "RECORD", "STORED", "ALIGNED"},
              {Align::Left, Align::Left, Align::Left, Align::Left, Align::Right, Align::Left, Align::Right, Align::Left});
  for (const Payload& e : payloads) {
    const Pt2Tensor* tensor = e.payload && e.payload->tensor ? &*e.payload->tensor : e.spec && e.spec->tensor ? &*e.spec->tensor : nullptr;
    const std::string name = e.spec ? e.spec->target : e.payload->name;
    std::string record = "-", stored = "-", aligned = "-";
    if (e.payload) {
      record = e.payload->record + (e.payload->use_pickle ? " (pickle)" : "");
      if (e.payload->present) {
        stored = human_size(e.payload->stored_size);
        aligned = !e.payload->stored ? "compressed" : e.payload->aligned ? "yes" : "no";
      } else {
        stored = "missing";
      }
    }
    t.add_row({name, role_of(e), tensor ? tensor->dtype : "", tensor ? dims_text(tensor->sizes) : "",
               tensor ? bytes_text(tensor->nbytes) : "-", record, stored, aligned});
  }
  t.print(out, 4);
}

json dims_json(const std::vector<Pt2Dim>& dims) {
  json out = json::array();
  for (const Pt2Dim& d : dims) {
    if (d.value) out.push_back(*d.value);
    else out.push_back(d.symbol);
  }
  return out;
}

json tensor_json(const Pt2Tensor& t) {
  json hints = json::array();
  for (const Pt2Dim& d : t.sizes) hints.push_back(d.value ? json(*d.value) : d.hint ? json(*d.hint) : json(nullptr));
  return {{"dtype", t.dtype},
          {"shape", dims_json(t.sizes)},
          {"example_shape", hints},
          {"stride", dims_json(t.strides)},
          {"storage_offset", t.storage_offset ? json(*t.storage_offset) : json(nullptr)},
          {"device", t.device},
          {"requires_grad", t.requires_grad},
          {"numel", t.numel ? json(*t.numel) : json(nullptr)},
          {"nbytes", t.nbytes ? json(*t.nbytes) : json(nullptr)}};
}

json arg_json(const Pt2Arg& a) {
  json out = {{"kind", a.kind}, {"name", a.name}, {"target", a.target}, {"value_type", a.value_type}};
  if (!a.value_text.empty()) out["value"] = a.value_text;
  if (a.persistent) out["persistent"] = *a.persistent;
  out["tensor"] = a.tensor ? tensor_json(*a.tensor) : json(nullptr);
  return out;
}

json payload_json(const Pt2Payload& p) {
  return {{"name", p.name},          {"record", p.record},          {"is_param", p.is_param},
          {"use_pickle", p.use_pickle}, {"present", p.present},     {"stored_size", p.stored_size},
          {"stored", p.stored},      {"aligned", p.aligned},
          {"tensor", p.tensor ? tensor_json(*p.tensor) : json(nullptr)}};
}

json program_json(const Pt2Program& p) {
  json inputs = json::array(), outputs = json::array(), ranges = json::array(), weights = json::array(),
       constants = json::array();
  for (const Pt2Arg& a : p.inputs) inputs.push_back(arg_json(a));
  for (const Pt2Arg& a : p.outputs) outputs.push_back(arg_json(a));
  for (const Pt2Range& r : p.ranges) {
    ranges.push_back({{"symbol", r.symbol}, {"min", r.min ? json(*r.min) : json(nullptr)},
                      {"max", r.max ? json(*r.max) : json(nullptr)}});
  }
  for (const Pt2Payload& w : p.weights) weights.push_back(payload_json(w));
  for (const Pt2Payload& c : p.constants) constants.push_back(payload_json(c));
  return {{"name", p.name},
          {"record", p.record},
          {"torch_version", p.torch_version},
          {"schema_version", p.schema_major ? json({{"major", *p.schema_major}, {"minor", p.schema_minor.value_or(0)}})
                                            : json(nullptr)},
          {"opset_version", p.opsets},
          {"verifiers", p.verifiers},
          {"nodes", p.nodes},
          {"operators", p.operators},
          {"inputs", inputs},
          {"outputs", outputs},
          {"range_constraints", ranges},
          {"weights_config", p.weights_config},
          {"weights", weights},
          {"constants_config", p.constants_config},
          {"constants", constants}};
}

}  // namespace

void render_pt2_text(const Pt2Contents& pt2, std::ostream& out) {
  for (const Pt2Program& p : pt2.programs) render_program(p, out);
  if (!pt2.aoti.empty()) {
    out << "\nAOTInductor models (" << pt2.aoti.size() << "; compiled code, never loaded by inspect)\n";
    TextTable t({"MODEL", "DEVICE", "FILES", "SIZE", "PLATFORM", "CPU ISA"},
                {Align::Left, Align::Left, Align::Right, Align::Right, Align::Left, Align::Left});
    for (const Pt2AotiModel& m : pt2.aoti) {
      const auto get = [&m](const char* key) {
        const auto it = m.metadata.find(key);
        return it == m.metadata.end() ? std::string() : it->second;
      };
      t.add_row({m.name, m.device.empty() ? "?" : m.device, with_commas(m.files.size()), human_size(m.bytes),
                 get("AOTI_PLATFORM") + " " + get("AOTI_MACHINE"), get("AOTI_CPU_ISA")});
    }
    t.print(out);
  }
  if (!pt2.sample_inputs.empty()) {
    out << "\nSample inputs\n";
    TextTable t({"MODEL", "VALUE", "DTYPE", "SHAPE", "SIZE"}, {Align::Left, Align::Left, Align::Left, Align::Left, Align::Right});
    for (const Pt2SampleInputs& s : pt2.sample_inputs) {
      if (!s.problem.empty()) t.add_row({s.model, "(" + s.problem + ")", "", "", ""});
      for (const TensorInfo& tensor : s.tensors) {
        t.add_row({s.model, tensor.path, tensor.dtype, shape_text(tensor.shape), human_size(tensor.nbytes)});
      }
    }
    t.print(out);
  }
}

nlohmann::ordered_json pt2_to_json(const Pt2Contents& pt2) {
  json programs = json::array(), aoti = json::array(), samples = json::array();
  for (const Pt2Program& p : pt2.programs) programs.push_back(program_json(p));
  for (const Pt2AotiModel& m : pt2.aoti) {
    json files = json::array();
    for (const Pt2AotiFile& f : m.files) files.push_back({{"name", f.name}, {"size", f.size}});
    aoti.push_back({{"name", m.name}, {"device", m.device}, {"metadata", m.metadata}, {"bytes", m.bytes}, {"files", files}});
  }
  for (const Pt2SampleInputs& s : pt2.sample_inputs) {
    json tensors = json::array();
    for (const TensorInfo& t : s.tensors) {
      tensors.push_back({{"path", t.path}, {"dtype", t.dtype}, {"shape", t.shape}, {"nbytes", t.nbytes}});
    }
    samples.push_back({{"model", s.model}, {"record", s.record}, {"size", s.size}, {"tensors", tensors},
                       {"problem", s.problem.empty() ? json(nullptr) : json(s.problem)}});
  }
  return {{"archive_format", pt2.archive_format},
          {"archive_version", pt2.archive_version},
          {"programs", programs},
          {"aotinductor", aoti},
          {"sample_inputs", samples}};
}

}  // namespace tsarchive::cli
