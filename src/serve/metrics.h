// `serve`'s GET /metrics: what each model's endpoint counts (requests by
// status, queue, compute and total latency, batch sizes, worker restarts) and
// the workers' sampled operator statistics, in Prometheus' text exposition
// format (version 0.0.4). Plain data and text; no sockets, no libtorch.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tsarchive/operator_events.h"

namespace tsarchive::serve {

// A cumulative histogram with fixed upper bounds (the last bucket, +Inf, is
// implied).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  const std::vector<double>& bounds() const { return bounds_; }
  // Observations at or below each bound, cumulative; then the total count.
  std::vector<uint64_t> cumulative() const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> buckets_;  // per bound, not cumulative; one more for +Inf
  uint64_t count_ = 0;
  double sum_ = 0;
};

// Seconds: 0.5 ms to 60 s.
std::vector<double> latency_bounds();
// Requests run in one call: 1, 2, 4, ... 1024.
std::vector<double> batch_bounds();

// One model's counters, as its endpoint records them (thread-safe).
class ModelMetrics {
 public:
  void request(int status, double total_s);
  void queued(double queue_s);
  void computed(size_t requests, double compute_s);
  void restarted();

  struct Snapshot {
    std::map<int, uint64_t> requests;  // by HTTP status
    Histogram queue{latency_bounds()}, compute{latency_bounds()}, total{latency_bounds()}, batch{batch_bounds()};
    uint64_t restarts = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mutex_;
  Snapshot data_;
};

// Everything /metrics says about one model.
struct ModelReport {
  std::string name;
  ModelMetrics::Snapshot counters;
  size_t queue_depth = 0;
  bool ready = false;
  int instances = 1;
  // The workers' sampled operators (model_id: the model's name), and the
  // probability they were sampled with; 0: --sample was not given.
  double sample = 0;
  std::vector<OperatorStats> operators;
  std::vector<std::string> api_usage;  // libtorch's API usage keys the workers fired
};

// The exposition text: one # HELP and # TYPE per family, then its samples,
// label values escaped.
std::string render_metrics(const std::vector<ModelReport>& models);

}  // namespace tsarchive::serve
