#include "cli/report_profile.h"

#include <cmath>

#include "cli/output.h"

namespace tsarchive::cli {
namespace {

using Align = TextTable::Align;

std::string count_text(double calls, bool estimated) {
  if (!estimated) return with_commas(static_cast<uint64_t>(std::llround(calls)));
  return calls >= 100 ? with_commas(static_cast<uint64_t>(std::llround(calls))) : short_number(calls);
}

std::string percent_text(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", p);
  return buf;
}

void render_operators(const ProfileReport& profile, const std::string& method, bool on_cuda, std::ostream& out) {
  const OperatorTable table = operator_table(profile);
  out << "\nOperators (" << with_commas(profile.calls) << " timed calls of " << method << ", model id \"" << profile.model_id
      << "\")\n";
  if (table.estimated) {
    out << "  sampled 1 in " << short_number(1 / table.sample) << " operator calls (--sample " << short_number(table.sample)
        << "): " << with_commas(table.sampled_calls) << " observed; calls and times are estimates (observed x "
        << short_number(1 / table.sample) << ")\n";
  } else {
    out << "  every operator call observed: " << with_commas(table.sampled_calls) << " calls\n";
  }
  if (table.rows.empty()) {
    out << "  (none sampled: raise --sample or time more calls with --iters / --duration)\n";
    return;
  }
  const bool shapes = profile.observed.record_shapes;
  const char* est = table.estimated ? "~" : "";
  std::vector<std::string> headers = {"operator",
                                      "scope",
                                      std::string(est) + "calls",
                                      "per call",
                                      std::string(est) + "total ms",
                                      std::string(est) + "self ms",
                                      "avg us",
                                      "self %"};
  std::vector<Align> align = {Align::Left,  Align::Left,  Align::Right, Align::Right,
                              Align::Right, Align::Right, Align::Right, Align::Right};
  if (shapes) {
    headers.push_back("input shapes");
    align.push_back(Align::Left);
  }
  TextTable text(headers, align);
  for (const OperatorRow& row : table.rows) {
    std::vector<std::string> cells = {row.name,
                                      row.scope,
                                      count_text(row.calls, table.estimated),
                                      short_number(row.calls_per_method_call),
                                      ms_text(row.total_ms),
                                      ms_text(row.self_ms),
                                      short_number(row.average_us),
                                      percent_text(row.self_percent)};
    if (shapes) cells.push_back(row.input_shapes);
    text.add_row(std::move(cells));
  }
  text.print(out);
  const bool kineto = profile.trace_by == kTraceByKineto;
  out << "  self time adds up to " << ms_text(table.self_ms) << " ms of the " << ms_text(profile.wall_ms)
      << " ms the timed calls took (" << percent_text(profile.wall_ms > 0 ? 100 * table.self_ms / profile.wall_ms : 0)
      << "%); the rest is outside operators. Timings include the observer's" << (kineto ? " and Kineto's" : "")
      << " cost.\n";
  if (kineto) {
    out << "  trace: kineto (Kineto's Chrome trace of every operator call" << (on_cuda ? " and CUDA kernel" : "")
        << " of the timed calls)\n";
  } else if (!profile.trace_by.empty()) {
    out << "  trace: " << profile.trace_by << " (the observed operator calls; this libtorch has no Kineto)\n";
  }
  if (profile.observed.dropped_events > 0) {
    out << "  note: the trace kept the first " << with_commas(profile.observed.events.size()) << " events; "
        << with_commas(profile.observed.dropped_events) << " more were counted but not kept\n";
  }
}

nlohmann::ordered_json profile_to_json(const ProfileReport& profile) {
  const OperatorTable table = operator_table(profile);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const OperatorRow& row : table.rows) {
    nlohmann::ordered_json item = {{"name", row.name},
                                   {"scope", row.scope},
                                   {"observed_calls", row.observed_calls},
                                   {"calls", row.calls},
                                   {"calls_per_method_call", row.calls_per_method_call},
                                   {"total_ms", row.total_ms},
                                   {"self_ms", row.self_ms},
                                   {"average_us", row.average_us},
                                   {"self_percent", row.self_percent}};
    if (profile.observed.record_shapes) item["input_shapes"] = row.input_shapes;
    rows.push_back(std::move(item));
  }
  return {{"model_id", profile.model_id},
          {"sample", table.sample},
          {"estimated", table.estimated},
          {"record_shapes", profile.observed.record_shapes},
          {"method_calls", profile.calls},
          {"wall_ms", profile.wall_ms},
          {"observed_calls", table.sampled_calls},
          {"self_ms", table.self_ms},
          {"dropped_events", profile.observed.dropped_events},
          {"trace", profile.trace_by.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(profile.trace_by)},
          {"operators", std::move(rows)}};
}

}  // namespace

void render_profile_text(const RunReport& r, std::ostream& out) {
  if (r.profile) render_operators(*r.profile, r.method, is_cuda_device(r.device), out);
  if (r.api_usage) {
    out << "\nAPI usage (keys libtorch fired, each once per process)\n";
    if (r.api_usage->empty()) out << "  (none)\n";
    for (const std::string& key : *r.api_usage) out << "  " << key << '\n';
  }
}

void add_profile_json(const RunReport& r, nlohmann::ordered_json& doc) {
  if (r.profile) {
    doc["schema"] = "tsarchive.profile/1";
    doc["profile"] = profile_to_json(*r.profile);
  }
  if (r.api_usage) doc["api_usage"] = *r.api_usage;
}

}  // namespace tsarchive::cli
