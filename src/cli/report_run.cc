#include "cli/report_run.h"

#include <cmath>
#include <cstdio>

#include "cli/output.h"
#include "cli/report_profile.h"

namespace tsarchive::cli {
namespace {

using Align = TextTable::Align;

std::string optional_number(const std::optional<double>& x) { return x ? short_number(*x) : std::string("-"); }

}  // namespace

void render_values(const char* title, const std::vector<ValueSummary>& values, std::ostream& out) {
  out << '\n' << title << '\n';
  if (values.empty()) {
    out << "  (none)\n";
    return;
  }
  TextTable table({"name", "type", "value", "device", "min", "max", "mean", "std", "nan", "inf"},
                  {Align::Left, Align::Left, Align::Left, Align::Left, Align::Right, Align::Right, Align::Right,
                   Align::Right, Align::Right, Align::Right});
  for (const ValueSummary& v : values) {
    if (!v.tensor) {
      table.add_row({v.path, v.class_name.empty() ? v.type : v.type + " " + v.class_name, v.value, "", "", "", "", "", "", ""});
      continue;
    }
    const TensorSummary& t = *v.tensor;
    table.add_row({v.path, v.type, t.dtype + " " + shape_text(t.shape), t.device, optional_number(t.min),
                   optional_number(t.max), optional_number(t.mean), optional_number(t.std), std::to_string(t.nan),
                   std::to_string(t.inf)});
  }
  table.print(out);
}

std::string tolerance_text(const Tolerance& t) {
  return "atol " + short_number(t.atol) + (t.scaled ? " (scaled by the largest |expected|)" : "") + ", rtol " + short_number(t.rtol);
}


namespace {

void render_checks(const RunReport& r, const RunVerdict& verdict, std::ostream& out) {
  if (r.checks.empty()) return;
  out << "\nCompared with " << verdict.expect << '\n';
  TextTable table({"output", "result", "tolerance", "detail"});
  for (const OutputCheck& c : r.checks) {
    table.add_row({c.path, c.passed ? "ok" : "MISMATCH", tolerance_text(c.tolerance), check_text(c)});
  }
  table.print(out);
}

void render_timings(const RunReport& r, std::ostream& out) {
  if (r.timings.empty()) return;
  const LatencySummary& first = r.timings.front().timing;
  out << "\nTiming (" << first.warmup << " warmup calls, then " << with_commas(first.iterations) << " timed"
      << (is_cuda_device(r.device) ? ", each synchronized" : "") << ")\n";
  TextTable table({"batch", "calls", "min ms", "mean ms", "p50 ms", "p90 ms", "p99 ms", "max ms", "throughput"},
                  {Align::Right, Align::Right, Align::Right, Align::Right, Align::Right, Align::Right, Align::Right,
                   Align::Right, Align::Right});
  for (const TimedBatch& b : r.timings) {
    const LatencySummary& t = b.timing;
    const std::string throughput = (t.throughput_per_s >= 100 ? with_commas(static_cast<uint64_t>(std::llround(t.throughput_per_s)))
                                                               : short_number(t.throughput_per_s)) +
                                   (b.batch_size > 0 ? " items/s" : " calls/s");
    table.add_row({b.batch_size > 0 ? std::to_string(b.batch_size) : "as given", with_commas(t.iterations),
                   ms_text(t.min_ms), ms_text(t.mean_ms), ms_text(t.p50_ms), ms_text(t.p90_ms), ms_text(t.p99_ms),
                   ms_text(t.max_ms), throughput});
  }
  table.print(out);
}

}  // namespace

nlohmann::ordered_json values_to_json(const std::vector<ValueSummary>& values) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ValueSummary& v : values) {
    nlohmann::ordered_json item = {{"path", v.path}, {"type", v.type}, {"depth", v.depth}};
    if (!v.class_name.empty()) item["class"] = v.class_name;
    if (v.integer) {
      item["value"] = *v.integer;
    } else if (v.real) {
      item["value"] = std::isfinite(*v.real) ? nlohmann::ordered_json(*v.real) : nlohmann::ordered_json(v.value);
    } else if (v.boolean) {
      item["value"] = *v.boolean;
    } else if (v.text) {
      item["value"] = *v.text;
    } else if (!v.value.empty()) {
      item["value"] = v.value;
    }
    if (v.tensor) {
      const TensorSummary& t = *v.tensor;
      item["dtype"] = t.dtype;
      item["shape"] = t.shape;
      item["device"] = t.device;
      item["numel"] = t.numel;
      item["min"] = number_or_null(t.min);
      item["max"] = number_or_null(t.max);
      item["mean"] = number_or_null(t.mean);
      item["std"] = number_or_null(t.std);
      item["nan"] = t.nan;
      item["inf"] = t.inf;
    }
    list.push_back(item);
  }
  return list;
}

nlohmann::ordered_json checks_to_json(const std::vector<OutputCheck>& checks) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const OutputCheck& c : checks) {
    nlohmann::ordered_json item = {{"path", c.path},
                                   {"passed", c.passed},
                                   {"atol", c.tolerance.atol},
                                   {"rtol", c.tolerance.rtol},
                                   {"elements", c.elements},
                                   {"mismatched", c.mismatched},
                                   {"max_abs_error", c.max_abs_error},
                                   {"max_rel_error", c.max_rel_error},
                                   {"worst_index", c.worst_index},
                                   {"actual", number_or_null(c.actual)},
                                   {"expected", number_or_null(c.expected)}};
    if (c.tolerance.scaled) item["atol_scaled"] = true;  // atol grew with the largest |expected| (contract/run.h)
    if (!c.problem.empty()) item["problem"] = c.problem;
    list.push_back(item);
  }
  return list;
}

namespace {

nlohmann::ordered_json timing_to_json(const LatencySummary& t) {
  return {{"iterations", t.iterations}, {"warmup", t.warmup}, {"min_ms", t.min_ms},   {"mean_ms", t.mean_ms},
          {"p50_ms", t.p50_ms},         {"p90_ms", t.p90_ms}, {"p99_ms", t.p99_ms},   {"max_ms", t.max_ms},
          {"total_s", t.total_s},       {"throughput_per_s", t.throughput_per_s}};
}

std::string first_nonfinite(const RunReport& r) {
  for (const ValueSummary& v : r.outputs) {
    if (v.tensor && v.tensor->nan + v.tensor->inf > 0) return v.path;
  }
  return "";
}

}  // namespace

void render_run_text(const RunReport& r, const std::string& file, const RunVerdict& verdict, std::ostream& out) {
  out << printable(file) << ": " << printable(r.schema) << '\n';
  out << "  device      " << r.device << " (" << r.device_name << "), " << plural(static_cast<uint64_t>(r.threads), "thread") << ", libtorch "
      << r.libtorch_version << '\n';
  out << "  first call  " << ms_text(r.first_call_ms) << " ms\n";
  for (const std::string& note : r.notes) out << "  note: " << printable(note) << '\n';
  render_values("Inputs", r.inputs, out);
  render_values("Outputs", r.outputs, out);
  render_checks(r, verdict, out);
  render_timings(r, out);
  render_profile_text(r, out);
}

nlohmann::ordered_json run_to_json(const RunReport& r, const std::string& file, const RunVerdict& verdict) {
  nlohmann::ordered_json doc = {{"schema", "tsarchive.run/1"},
                                {"file", file},
                                {"method", r.method},
                                {"signature", r.schema},
                                {"device", r.device},
                                {"device_name", r.device_name},
                                {"threads", r.threads},
                                {"libtorch", r.libtorch_version},
                                {"passed", verdict.passed(r)},
                                {"nonfinite", r.nonfinite()},
                                {"first_call_ms", r.first_call_ms},
                                {"inputs", values_to_json(r.inputs)},
                                {"outputs", values_to_json(r.outputs)}};
  if (!r.checks.empty()) {
    doc["expect"] = verdict.expect;
    doc["checks"] = checks_to_json(r.checks);
  }
  if (r.timings.size() == 1 && r.timings.front().batch_size == 0) {
    doc["timing"] = timing_to_json(r.timings.front().timing);
  } else if (!r.timings.empty()) {
    nlohmann::ordered_json sweep = nlohmann::ordered_json::array();
    for (const TimedBatch& b : r.timings) sweep.push_back({{"batch_size", b.batch_size}, {"timing", timing_to_json(b.timing)}});
    doc["sweep"] = sweep;
  }
  add_profile_json(r, doc);
  doc["notes"] = r.notes;
  return doc;
}


int report_run_failures(const RunReport& r, const std::string& file, const RunVerdict& verdict, std::ostream& err) {
  int code = 0;
  if (verdict.nonfinite_fails(r)) {
    print_error(err, Error(ErrorKind::CheckFailed,
                           "the outputs hold " + with_commas(r.nonfinite()) + " NaN or Inf values, first in " +
                               first_nonfinite(r),
                           file, "pass --allow-nonfinite if they are expected"));
    code = 1;
  }
  for (const OutputCheck& c : r.checks) {
    if (c.passed) continue;
    print_error(err, Error(ErrorKind::CheckFailed, c.path + " differs from " + verdict.expect + ": " + check_text(c), file,
                           failed_check_hint(c)));
    code = 1;
    break;  // the table shows the rest
  }
  return code;
}

void render_top_text(const TopReport& top, std::ostream& out) {
  out << "\nTop " << top.classes.size() << " of out"
      << (top.labels_from.empty() ? std::string(" (no labels)") : " (labels: " + printable(top.labels_from) + ")") << '\n';
  TextTable table({"rank", "class", "label", "score", "probability"},
                  {TextTable::Align::Right, TextTable::Align::Right, TextTable::Align::Left, TextTable::Align::Right,
                   TextTable::Align::Right});
  for (size_t i = 0; i < top.classes.size(); ++i) {
    const TopClass& c = top.classes[i];
    table.add_row({std::to_string(i + 1), std::to_string(c.index), c.label, short_number(c.score),
                   short_number(c.probability)});
  }
  table.print(out);
}

nlohmann::ordered_json top_to_json(const TopReport& top) {
  nlohmann::ordered_json classes = nlohmann::ordered_json::array();
  for (const TopClass& c : top.classes) {
    classes.push_back({{"index", c.index}, {"label", c.label}, {"score", c.score}, {"probability", c.probability}});
  }
  return {{"labels", top.labels_from}, {"classes", classes}};
}

}  // namespace tsarchive::cli
