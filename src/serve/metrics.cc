#include "serve/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <tuple>

namespace tsarchive::serve {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), buckets_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++buckets_[i];
  ++count_;
  sum_ += value;
}

std::vector<uint64_t> Histogram::cumulative() const {
  std::vector<uint64_t> out;
  uint64_t running = 0;
  for (uint64_t n : buckets_) {
    running += n;
    out.push_back(running);
  }
  return out;
}

std::vector<double> latency_bounds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

std::vector<double> batch_bounds() { return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}; }

void ModelMetrics::request(int status, double total_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++data_.requests[status];
  data_.total.observe(total_s);
}

void ModelMetrics::queued(double queue_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.queue.observe(queue_s);
}

void ModelMetrics::computed(size_t requests, double compute_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.batch.observe(static_cast<double>(requests));
  data_.compute.observe(compute_s);
}

void ModelMetrics::restarted() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++data_.restarts;
}

ModelMetrics::Snapshot ModelMetrics::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return data_;
}

namespace {

// A label value: backslash, double quote and line feed escaped.
std::string escaped(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// Shortest text that reads back as the same double; +Inf, -Inf, NaN as
// Prometheus spells them.
std::string number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

class Exposition {
 public:
  void family(const std::string& name, const char* type, const std::string& help) {
    text_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const std::string& name, const std::string& labels, double value) {
    text_ += name + (labels.empty() ? "" : "{" + labels + "}") + " " + number(value) + "\n";
  }
  void histogram(const std::string& name, const std::string& labels, const Histogram& h) {
    const std::vector<uint64_t> counts = h.cumulative();
    for (size_t i = 0; i < h.bounds().size(); ++i) {
      sample(name + "_bucket", labels + ",le=\"" + number(h.bounds()[i]) + "\"", static_cast<double>(counts[i]));
    }
    sample(name + "_bucket", labels + ",le=\"+Inf\"", static_cast<double>(counts.back()));
    sample(name + "_sum", labels, h.sum());
    sample(name + "_count", labels, static_cast<double>(h.count()));
  }
  std::string text() && { return std::move(text_); }

 private:
  std::string text_;
};

std::string model_label(const ModelReport& m) { return "model=\"" + escaped(m.name) + "\""; }

// Sampled operator stats of every instance summed by (scope, operator).
std::map<std::pair<std::string, std::string>, OperatorStats> by_operator(const ModelReport& m) {
  std::map<std::pair<std::string, std::string>, OperatorStats> out;
  for (const OperatorStats& op : m.operators) {
    OperatorStats& sum = out[{op.scope, op.name}];
    sum.name = op.name;
    sum.scope = op.scope;
    sum.calls += op.calls;
    sum.total_ns += op.total_ns;
    sum.self_ns += op.self_ns;
  }
  return out;
}

}  // namespace

std::string render_metrics(const std::vector<ModelReport>& models) {
  Exposition out;
  out.family("tsarchive_serve_requests_total", "counter", "Infer requests answered, by model and HTTP status.");
  for (const ModelReport& m : models) {
    for (const auto& [status, count] : m.counters.requests) {
      out.sample("tsarchive_serve_requests_total", model_label(m) + ",status=\"" + std::to_string(status) + "\"",
                 static_cast<double>(count));
    }
  }
  const std::tuple<const char*, const char*, Histogram ModelMetrics::Snapshot::*> latencies[] = {
      {"tsarchive_serve_request_seconds", "Infer request latency from its arrival to its answer, every status.",
       &ModelMetrics::Snapshot::total},
      {"tsarchive_serve_queue_seconds", "Time a request waited in its model's queue before its call began.",
       &ModelMetrics::Snapshot::queue},
      {"tsarchive_serve_compute_seconds", "Duration of one worker call (a batch or a request alone), as the server saw it.",
       &ModelMetrics::Snapshot::compute},
      {"tsarchive_serve_batch_size", "Requests run together in one worker call.", &ModelMetrics::Snapshot::batch},
  };
  for (const auto& [name, help, member] : latencies) {
    out.family(name, "histogram", help);
    for (const ModelReport& m : models) out.histogram(name, model_label(m), m.counters.*member);
  }
  out.family("tsarchive_serve_queue_depth", "gauge", "Requests waiting in the model's queue now.");
  for (const ModelReport& m : models) out.sample("tsarchive_serve_queue_depth", model_label(m), static_cast<double>(m.queue_depth));
  out.family("tsarchive_serve_model_ready", "gauge", "1 when every worker of the model is loaded and serving, else 0.");
  for (const ModelReport& m : models) out.sample("tsarchive_serve_model_ready", model_label(m), m.ready ? 1 : 0);
  out.family("tsarchive_serve_instances", "gauge", "Worker processes serving the model (--instances).");
  for (const ModelReport& m : models) out.sample("tsarchive_serve_instances", model_label(m), m.instances);
  out.family("tsarchive_serve_worker_restarts_total", "counter", "Times a worker of the model died and was started again.");
  for (const ModelReport& m : models) {
    out.sample("tsarchive_serve_worker_restarts_total", model_label(m), static_cast<double>(m.counters.restarts));
  }

  // --sample P: the observer's sampled operator calls, scaled by 1/P into
  // estimates of every call (as run --profile's table).
  bool sampled = false;
  for (const ModelReport& m : models) sampled = sampled || m.sample > 0;
  if (!sampled) return std::move(out).text();
  out.family("tsarchive_serve_operator_sample_probability", "gauge", "The probability an operator call is observed (--sample).");
  for (const ModelReport& m : models) {
    if (m.sample > 0) out.sample("tsarchive_serve_operator_sample_probability", model_label(m), m.sample);
  }
  out.family("tsarchive_serve_api_usage", "gauge", "1 for each libtorch API usage key the model's workers fired.");
  for (const ModelReport& m : models) {
    for (const std::string& key : m.api_usage) {
      out.sample("tsarchive_serve_api_usage", model_label(m) + ",key=\"" + escaped(key) + "\"", 1);
    }
  }
  const std::tuple<const char*, const char*, int> families[] = {
      {"tsarchive_serve_operator_calls_total", "Operator calls (estimated: sampled calls / probability).", 0},
      {"tsarchive_serve_operator_seconds_total", "Operator wall time with the operators it calls (estimated).", 1},
      {"tsarchive_serve_operator_self_seconds_total", "Operator wall time without the operators it calls (estimated).", 2},
      {"tsarchive_serve_operator_sampled_calls_total", "Operator calls the observer sampled.", 3},
  };
  for (const auto& [name, help, which] : families) {
    out.family(name, "counter", help);
    for (const ModelReport& m : models) {
      if (m.sample <= 0) continue;
      for (const auto& [key, op] : by_operator(m)) {
        const std::string labels = model_label(m) + ",operator=\"" + escaped(op.name) + "\",scope=\"" + escaped(op.scope) + "\"";
        double value = static_cast<double>(op.calls);
        if (which == 1) value = static_cast<double>(op.total_ns) / 1e9;
        if (which == 2) value = static_cast<double>(op.self_ns) / 1e9;
        if (which != 3) value /= m.sample;
        out.sample(name, labels, value);
      }
    }
  }
  return std::move(out).text();
}

}  // namespace tsarchive::serve
