// Unified line diffs (the algorithm and output format are described in text_diff.h).
#include "core/compare/text_diff.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace tsarchive {
namespace {

enum class Op : uint8_t { Equal, Delete, Insert };

// Lines with their '\n' (the last one may have none).
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t nl = text.find('\n', begin);
    const size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    lines.push_back(text.substr(begin, end - begin));
    begin = end;
  }
  return lines;
}

// A shortest edit script turning a[0..n) into b[0..m), appended to `ops`;
// false when it needs more than `max_edits` edits.
bool myers(const uint32_t* a, int64_t n, const uint32_t* b, int64_t m, size_t max_edits, std::vector<Op>& ops) {
  const int64_t max_d = std::min<int64_t>(n + m, static_cast<int64_t>(max_edits));
  const int64_t offset = max_d + 1;
  std::vector<int64_t> v(static_cast<size_t>(2 * max_d + 3), 0);
  auto V = [&](int64_t k) -> int64_t& { return v[static_cast<size_t>(k + offset)]; };
  // Round d holds x for k = -d, -d+2, ..., d, at d*(d+1)/2 + (k+d)/2.
  std::vector<int32_t> trace;
  auto traced = [&](int64_t d, int64_t k) { return int64_t{trace[static_cast<size_t>(d * (d + 1) / 2 + (k + d) / 2)]}; };

  int64_t edits = -1;
  for (int64_t d = 0; d <= max_d && edits < 0; ++d) {
    for (int64_t k = -d; k <= d; k += 2) {
      int64_t x = (k == -d || (k != d && V(k - 1) < V(k + 1))) ? V(k + 1) : V(k - 1) + 1;
      int64_t y = x - k;
      while (x < n && y < m && a[x] == b[y]) ++x, ++y;
      V(k) = x;
      trace.push_back(static_cast<int32_t>(x));
      if (x >= n && y >= m) {
        edits = d;
        break;
      }
    }
  }
  if (edits < 0) return false;

  std::vector<Op> script;
  int64_t x = n, y = m;
  for (int64_t d = edits; d > 0; --d) {
    const int64_t k = x - y;
    const bool down = k == -d || (k != d && traced(d - 1, k - 1) < traced(d - 1, k + 1));
    const int64_t prev_k = down ? k + 1 : k - 1;
    const int64_t prev_x = traced(d - 1, prev_k);
    const int64_t snake_x = down ? prev_x : prev_x + 1;  // where the move lands; equal lines from there
    for (; x > snake_x; --x, --y) script.push_back(Op::Equal);
    script.push_back(down ? Op::Insert : Op::Delete);
    x = prev_x;
    y = prev_x - prev_k;
  }
  for (; x > 0; --x) script.push_back(Op::Equal);
  ops.insert(ops.end(), script.rbegin(), script.rend());
  return true;
}

std::string hunk_range(size_t first, size_t count) {
  if (count == 0) return std::to_string(first) + ",0";
  if (count == 1) return std::to_string(first + 1);
  return std::to_string(first + 1) + "," + std::to_string(count);
}

void append_line(std::string& out, char prefix, std::string_view line) {
  out += prefix;
  out += line;
  if (line.empty() || line.back() != '\n') out += "\n\\ No newline at end of file\n";
}

// Hunks of `ops` over the two line lists, as unified-diff text.
std::string render_hunks(const std::vector<Op>& ops, const std::vector<std::string_view>& a,
                         const std::vector<std::string_view>& b, size_t context) {
  const size_t n = ops.size();
  std::vector<size_t> old_at(n + 1, 0), new_at(n + 1, 0);  // line indices before each op
  for (size_t t = 0; t < n; ++t) {
    old_at[t + 1] = old_at[t] + (ops[t] != Op::Insert ? 1 : 0);
    new_at[t + 1] = new_at[t] + (ops[t] != Op::Delete ? 1 : 0);
  }
  std::string out;
  size_t done = 0;
  while (true) {
    size_t change = done;
    while (change < n && ops[change] == Op::Equal) ++change;
    if (change == n) break;
    const size_t begin = std::max(done, change >= context ? change - context : 0);
    size_t end = change;
    while (true) {
      while (end < n && ops[end] != Op::Equal) ++end;
      size_t run = end;
      while (run < n && ops[run] == Op::Equal) ++run;
      if (run < n && run - end <= 2 * context) {
        end = run;
        continue;
      }
      end = std::min(end + context, run);
      break;
    }
    out += "@@ -" + hunk_range(old_at[begin], old_at[end] - old_at[begin]) + " +" +
           hunk_range(new_at[begin], new_at[end] - new_at[begin]) + " @@\n";
    size_t i = old_at[begin], j = new_at[begin];
    for (size_t t = begin; t < end;) {
      if (ops[t] == Op::Equal) {
        append_line(out, ' ', a[i++]);
        ++j;
        ++t;
        continue;
      }
      size_t deleted = 0, inserted = 0;
      for (; t < end && ops[t] != Op::Equal; ++t) (ops[t] == Op::Delete ? deleted : inserted) += 1;
      for (size_t k = 0; k < deleted; ++k) append_line(out, '-', a[i++]);
      for (size_t k = 0; k < inserted; ++k) append_line(out, '+', b[j++]);
    }
    done = end;
  }
  return out;
}

}  // namespace

TextDiff diff_text(std::string_view old_text, std::string_view new_text, const std::string& old_label,
                   const std::string& new_label, const TextDiffLimits& limits) {
  TextDiff result;
  const std::vector<std::string_view> a = split_lines(old_text), b = split_lines(new_text);
  result.old_lines = a.size();
  result.new_lines = b.size();
  if (old_text == new_text) {
    result.identical = result.computed = true;
    return result;
  }
  size_t prefix = 0;
  while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix]) ++prefix;
  size_t suffix = 0;
  while (suffix < a.size() - prefix && suffix < b.size() - prefix &&
         a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix]) {
    ++suffix;
  }
  const size_t n = a.size() - prefix - suffix, m = b.size() - prefix - suffix;
  if (n > limits.max_lines || m > limits.max_lines) return result;

  std::unordered_map<std::string_view, uint32_t> ids;
  ids.reserve(n + m);
  std::vector<uint32_t> x(n), y(m);
  for (size_t i = 0; i < n; ++i) x[i] = ids.emplace(a[prefix + i], static_cast<uint32_t>(ids.size())).first->second;
  for (size_t i = 0; i < m; ++i) y[i] = ids.emplace(b[prefix + i], static_cast<uint32_t>(ids.size())).first->second;

  std::vector<Op> ops(prefix, Op::Equal);
  if (!myers(x.data(), static_cast<int64_t>(n), y.data(), static_cast<int64_t>(m), limits.max_edits, ops)) {
    return result;
  }
  ops.insert(ops.end(), suffix, Op::Equal);
  for (Op op : ops) {
    result.lines_removed += op == Op::Delete ? 1 : 0;
    result.lines_added += op == Op::Insert ? 1 : 0;
  }
  result.computed = true;
  result.unified = "--- " + old_label + "\n+++ " + new_label + "\n" + render_hunks(ops, a, b, limits.context);
  return result;
}

}  // namespace tsarchive
