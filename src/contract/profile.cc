#include "contract/profile.h"

#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

namespace tsarchive {

OperatorTable operator_table(const ProfileReport& report) {
  const ObserverSnapshot& seen = report.observed;
  OperatorTable table;
  table.sample = seen.sample > 0 ? seen.sample : 1.0;
  table.estimated = table.sample < 1.0;
  table.sampled_calls = seen.sampled_calls;
  const double scale = 1.0 / table.sample;

  std::map<std::tuple<std::string, std::string, std::string>, OperatorRow> rows;
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<int64_t, int64_t>> ns;  // total, self
  for (const OperatorStats& s : seen.operators) {
    const auto key = std::make_tuple(s.scope, s.name, s.input_shapes);
    OperatorRow& row = rows[key];
    row.name = s.name;
    row.scope = s.scope;
    row.input_shapes = s.input_shapes;
    row.observed_calls += s.calls;
    ns[key].first += s.total_ns;
    ns[key].second += s.self_ns;
  }
  for (auto& [key, row] : rows) {
    const auto [total_ns, self_ns] = ns[key];
    row.calls = static_cast<double>(row.observed_calls) * scale;
    row.calls_per_method_call = report.calls > 0 ? row.calls / static_cast<double>(report.calls) : 0;
    row.total_ms = static_cast<double>(total_ns) * 1e-6 * scale;
    row.self_ms = static_cast<double>(self_ns) * 1e-6 * scale;
    row.average_us = row.observed_calls > 0 ? static_cast<double>(total_ns) * 1e-3 / static_cast<double>(row.observed_calls) : 0;
    row.self_percent = report.wall_ms > 0 ? 100.0 * row.self_ms / report.wall_ms : 0;
    table.self_ms += row.self_ms;
    table.rows.push_back(std::move(row));
  }
  std::stable_sort(table.rows.begin(), table.rows.end(), [](const OperatorRow& a, const OperatorRow& b) {
    return a.self_ms > b.self_ms;
  });
  return table;
}

std::string chrome_trace_json(const ProfileReport& report, const std::string& process_name, int64_t pid) {
  const std::vector<OperatorEvent>& events = report.observed.events;
  int64_t origin = std::numeric_limits<int64_t>::max();
  std::set<uint64_t> threads;
  for (const OperatorEvent& e : events) {
    origin = std::min(origin, e.start_ns);
    threads.insert(e.thread);
  }
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  list.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", process_name}}}});
  for (uint64_t thread : threads) {
    list.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", thread},
                    {"args", {{"name", "libtorch thread " + std::to_string(thread)}}}});
  }
  for (const OperatorEvent& e : events) {
    nlohmann::ordered_json args = {{"model_id", e.model_id}, {"scope", e.scope}, {"self_us", static_cast<double>(e.self_ns) * 1e-3}};
    if (!e.input_shapes.empty()) args["input_shapes"] = e.input_shapes;
    list.push_back({{"name", e.name},
                    {"cat", e.scope},
                    {"ph", "X"},
                    {"ts", static_cast<double>(e.start_ns - origin) * 1e-3},
                    {"dur", static_cast<double>(e.duration_ns) * 1e-3},
                    {"pid", pid},
                    {"tid", e.thread},
                    {"args", std::move(args)}});
  }
  nlohmann::ordered_json doc = {{"traceEvents", std::move(list)},
                                {"displayTimeUnit", "ms"},
                                {"otherData",
                                 {{"producer", "tsarchive run --profile"},
                                  {"model_id", report.model_id},
                                  {"sample", report.observed.sample},
                                  {"method_calls", report.calls},
                                  {"dropped_events", report.observed.dropped_events}}}};
  return doc.dump() + '\n';
}

std::string trace_file_text(const ProfileReport& report, const std::string& process_name, int64_t pid) {
  if (report.trace_by == kTraceByKineto) return report.kineto_trace;
  return chrome_trace_json(report, process_name, pid);
}

}  // namespace tsarchive
