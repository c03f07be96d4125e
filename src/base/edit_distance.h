// "Did you mean ...?": the distance between a word someone typed and the
// names it could have meant, and the closest of those names when it is close
// enough to be a slip rather than another word.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tsarchive {

// Optimal string alignment distance: insertions, deletions, substitutions and
// transpositions of two adjacent characters each cost 1 ("inpsect" is 1 from
// "inspect"). ASCII letters compare without case. O(|a|·|b|) time, O(|b|) memory.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word` when it is within 1 edit for words of up
// to 4 characters, 2 up to 8, else 3 (and less than the word's length, so
// "x" suggests nothing); ties go to the earlier candidate. None when `word`
// is itself a candidate or no candidate is that close.
std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace tsarchive

namespace tsarchive {

// "did you mean 'forward'? " when closest_match finds one, else "": the start
// of a hint that goes on to list the names.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace tsarchive
