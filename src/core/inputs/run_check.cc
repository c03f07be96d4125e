#include "core/inputs/run_check.h"

#include "base/base64.h"
#include "base/bounded_json.h"
#include "base/error.h"
#include "base/strings.h"
#include "core/inputs/input_values.h"
#include "format/archive.h"
#include "format/byte_source.h"

namespace tsarchive {

std::string value_line(const ValueSummary& v) {
  std::string line = v.path + ": " + v.type;
  if (v.tensor) line += " " + v.tensor->dtype + " " + shape_text(v.tensor->shape);
  if (!v.value.empty()) line += " " + v.value;
  return line;
}

std::string render_run_check(const RunCheck& c) {
  nlohmann::json doc = {{"_type", kRunCheckType}, {"method", c.method},       {"atol", c.tolerance.atol},
                        {"rtol", c.tolerance.rtol}, {"device", c.device},     {"libtorch", c.libtorch},
                        {"producer", c.producer},   {"createdAt", c.created_at}, {"inputs", c.inputs},
                        {"outputs", c.outputs}};
  if (c.encoding == RunCheckEncoding::Base64) doc["encoding"] = "base64";
  nlohmann::json tolerances = nlohmann::json::object();
  for (const auto& [path, t] : c.tolerance_by_path) tolerances[path] = {{"atol", t.atol}, {"rtol", t.rtol}};
  doc["tolerances"] = tolerances;
  return doc.dump();  // nlohmann::json keeps keys sorted
}

RunCheck parse_run_check(const std::string& json, const std::string& file) {
  const auto bad = [&](const std::string& what) -> RunCheck {
    throw_bad_input(extra_record_name(kRunCheckName) + " " + what, file,
                    "record it again with 'tsarchive run --record'");
  };
  std::string problem;
  const std::optional<nlohmann::json> parsed = parse_bounded_json(json, &problem);
  if (!parsed) return bad(problem == kNotValidJson ? "is not JSON" : "holds " + problem);
  const nlohmann::json& doc = *parsed;
  if (!doc.is_object()) return bad("is not JSON");
  if (doc.value("_type", "") != kRunCheckType) return bad("is not a run check this tsarchive reads (_type)");
  RunCheck c;
  try {
    c.method = doc.at("method").get<std::string>();
    c.tolerance = Tolerance{doc.at("atol").get<double>(), doc.at("rtol").get<double>()};
    const nlohmann::json tolerances = doc.value("tolerances", nlohmann::json::object());
    for (const auto& [path, t] : tolerances.items()) {
      c.tolerance_by_path[path] = Tolerance{t.at("atol").get<double>(), t.at("rtol").get<double>()};
    }
    c.device = doc.value("device", "");
    c.libtorch = doc.value("libtorch", "");
    c.producer = doc.value("producer", "");
    c.created_at = doc.value("createdAt", "");
    c.inputs = doc.value("inputs", std::vector<std::string>{});
    c.outputs = doc.value("outputs", std::vector<std::string>{});
    const std::string encoding = doc.value("encoding", "");
    if (encoding == "base64") {
      c.encoding = RunCheckEncoding::Base64;
    } else if (!encoding.empty()) {
      return bad("stores its inputs and outputs as '" + encoding.substr(0, 40) +
                 "', which this tsarchive does not read (encoding)");
    }
  } catch (const nlohmann::json::exception& e) {
    return bad(std::string("is malformed: ") + e.what());
  }
  if (c.method.empty()) return bad("names no method");
  return c;
}

RunCheckEncoding run_check_encoding_for(FileKind kind) {
  return kind == FileKind::ExportedProgram ? RunCheckEncoding::Base64 : RunCheckEncoding::TorchSave;
}

RunCheckFiles run_check_files(RunCheckEncoding encoding) {
  if (encoding == RunCheckEncoding::Base64) {
    return {std::string(kRunCheckInputsName) + ".b64", std::string(kRunCheckOutputsName) + ".b64"};
  }
  return {kRunCheckInputsName, kRunCheckOutputsName};
}

std::vector<ExtraEdit> run_check_edits(const RunCheck& check, const std::string& inputs_pt,
                                       const std::string& outputs_pt) {
  const RunCheckFiles files = run_check_files(check.encoding);
  const bool text = check.encoding == RunCheckEncoding::Base64;
  return {ExtraEdit{kRunCheckName, render_run_check(check)},
          ExtraEdit{files.inputs, text ? base64_encode(inputs_pt) : inputs_pt},
          ExtraEdit{files.outputs, text ? base64_encode(outputs_pt) : outputs_pt}};
}

bool has_run_check(const TorchArchive& archive) { return archive.find(extra_record_name(kRunCheckName)) != nullptr; }

namespace {

void require_check_file(const TorchArchive& archive, const std::string& name, const std::string& file) {
  if (archive.find(extra_record_name(name)) == nullptr) {
    throw_bad_input("the archive has no recorded check (extra/" + name + " is missing)", file,
                    "record one with 'tsarchive run MODEL --input ... --record'");
  }
}

// One recorded file's torch.save bytes: as stored, or decoded from base64
// (read up to the size that much base64 takes, with room for line breaks).
std::string read_check_file(const TorchArchive& archive, const std::string& name, RunCheckEncoding encoding,
                            const std::string& file, uint64_t max_size) {
  if (encoding == RunCheckEncoding::TorchSave) return read_extra(archive, name, max_size);
  const std::string text = read_extra(archive, name, max_size / 3 * 4 + max_size / 8 + 8);
  std::string problem;
  std::optional<std::string> bytes = base64_decode(text, &problem);
  if (!bytes) {
    throw_bad_input(extra_record_name(name) + " is not base64: " + problem, file,
                    "record it again with 'tsarchive run --record'");
  }
  if (bytes->size() > max_size) {
    throw_bad_input(extra_record_name(name) + " decodes to " + human_size(bytes->size()) + ", above the " +
                        human_size(max_size) + " a recorded check may hold",
                    file, "record it again with smaller inputs");
  }
  return std::move(*bytes);
}

}  // namespace

RecordedCheck read_recorded_check(const TorchArchive& archive, const std::string& file, uint64_t max_size) {
  require_check_file(archive, kRunCheckName, file);
  RecordedCheck recorded;
  recorded.check = parse_run_check(read_extra(archive, kRunCheckName, 1 << 20), file);
  recorded.files = run_check_files(recorded.check.encoding);
  require_check_file(archive, recorded.files.inputs, file);
  require_check_file(archive, recorded.files.outputs, file);
  try {
    recorded.inputs_pt = read_check_file(archive, recorded.files.inputs, recorded.check.encoding, file, max_size);
    recorded.outputs_pt = read_check_file(archive, recorded.files.outputs, recorded.check.encoding, file, max_size);
  } catch (const Error& e) {
    throw e.with_file(file);
  }
  return recorded;
}

std::string check_text(const OutputCheck& c) {
  if (!c.problem.empty()) return c.problem;
  std::string s = with_commas(c.elements) + (c.elements == 1 ? " value" : " values");
  if (!c.passed) s = with_commas(c.mismatched) + " of " + s + " outside tolerance";
  s += "; max abs error " + short_number(c.max_abs_error);
  if (c.max_rel_error > 0) s += ", max rel error " + short_number(c.max_rel_error);
  if (!c.passed && c.actual && c.expected) {
    s += "; worst at " + shape_text(c.worst_index) + ": " + short_number(*c.actual) + " vs expected " +
         short_number(*c.expected);
  }
  return s;
}

std::string failed_check_hint(const OutputCheck& c) {
  if (c.problem.empty()) return "raise --atol/--rtol if the difference is acceptable";
  return "the output's shape, type or structure differs from the expected value, which no tolerance changes: check "
         "that the expected value is of this method and these inputs";
}

RunCheck load_recorded_check(const TorchArchive& archive, RunRequest& request, const std::string& file,
                             InputBudget& budget) {
  RecordedCheck recorded = read_recorded_check(archive, file, std::min<uint64_t>(1ull << 30, budget.limit()));
  const auto value_of = [&](std::string& bytes, const std::string& name) {
    try {
      return read_torch_save_value(*make_memory_source(std::move(bytes), extra_record_name(name)), budget);
    } catch (const Error& e) {
      throw e.with_file(file);
    }
  };
  HostValue inputs = value_of(recorded.inputs_pt, recorded.files.inputs);
  inputs.origin = extra_record_name(recorded.files.inputs);
  inputs.spreads = true;
  request.inputs = {inputs};
  request.expect = value_of(recorded.outputs_pt, recorded.files.outputs);
  request.method = recorded.check.method;
  return recorded.check;
}

}  // namespace tsarchive
