#include "contract/run.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tsarchive {

uint64_t RunReport::nonfinite() const {
  uint64_t n = 0;
  for (const ValueSummary& v : outputs) {
    if (v.tensor) n += v.tensor->nan + v.tensor->inf;
  }
  return n;
}

bool RunReport::checks_passed() const {
  return std::all_of(checks.begin(), checks.end(), [](const OutputCheck& c) { return c.passed; });
}

// Nearest-rank percentiles: p50 of 1..100 is 50, p99 of 10 samples is the largest.
LatencySummary summarize_latencies(std::vector<double> ms, int warmup, int64_t batch_size) {
  LatencySummary s;
  s.warmup = warmup;
  s.iterations = ms.size();
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  const auto rank = [&](double p) {
    const size_t r = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(ms.size())));
    return ms[std::min(ms.size(), std::max<size_t>(r, 1)) - 1];
  };
  const double total = std::accumulate(ms.begin(), ms.end(), 0.0);
  s.min_ms = ms.front();
  s.max_ms = ms.back();
  s.mean_ms = total / static_cast<double>(ms.size());
  s.p50_ms = rank(50);
  s.p90_ms = rank(90);
  s.p99_ms = rank(99);
  s.total_s = total / 1000.0;
  if (total > 0) {
    s.throughput_per_s = static_cast<double>(ms.size()) * static_cast<double>(std::max<int64_t>(batch_size, 1)) / s.total_s;
  }
  return s;
}

}  // namespace tsarchive
