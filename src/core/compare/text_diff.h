// Line diffs of text, printed as `diff -u` prints them.
//
// Algorithm: lines are interned to integer ids; the common prefix and suffix
// are set aside; the rest goes through Myers' greedy O((N+M)D) algorithm
// ("An O(ND) Difference Algorithm and Its Variations", 1986), which finds a
// shortest edit script. It keeps each round's furthest-reaching x per diagonal
// (d+1 values in round d) to walk the script back, so memory is O(D^2) and
// time O((N+M)D), with N and M counted between the common prefix and suffix.
// Both are bounded by TextDiffLimits: when either side has more than
// `max_lines` lines there, or the pair needs more than `max_edits` inserted
// plus deleted lines, it is not diffed; the result says so and gives the line
// counts.
//
// Output (GNU unified format):
//   --- <old label>
//   +++ <new label>
//   @@ -l,s +l,s @@        one hunk per group of changes, `context` lines around;
//                          groups closer than 2*context lines share a hunk.
//                          ",s" is left out when s is 1; an empty side is
//                          "l,0" with l the line before it (0 at the start).
//    line / -line / +line  within a run of changes all '-' lines come first.
//   \ No newline at end of file   after a last line that has no '\n'.
// A line is its bytes including its '\n', so "x" and "x\n" at the end differ.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tsarchive {

struct TextDiffLimits {
  size_t max_lines = 200'000;  // per side, between the common prefix and suffix
  size_t max_edits = 2'000;    // inserted + deleted lines; the trace is ~max_edits^2/2 ints (8 MB)
  size_t context = 3;
};

struct TextDiff {
  bool identical = false;
  bool computed = false;  // false when the limits kept us from diffing; `unified` is then empty
  size_t old_lines = 0;
  size_t new_lines = 0;
  size_t lines_added = 0;
  size_t lines_removed = 0;
  std::string unified;  // header and hunks; empty when identical or not computed
};

// Diffs `old_text` against `new_text`; the labels go on the ---/+++ lines
// (e.g. "a/code/__torch__/m.py", or "/dev/null" for a side that is absent).
TextDiff diff_text(std::string_view old_text, std::string_view new_text, const std::string& old_label,
                   const std::string& new_label, const TextDiffLimits& limits = {});

}  // namespace tsarchive
