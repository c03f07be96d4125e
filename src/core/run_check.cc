#include "core/run_check.h"

#include "base/bounded_json.h"
#include "base/error.h"
#include "base/strings.h"
#include "format/archive.h"

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
  } catch (const nlohmann::json::exception& e) {
    return bad(std::string("is malformed: ") + e.what());
  }
  if (c.method.empty()) return bad("names no method");
  return c;
}

}  // namespace tsarchive
