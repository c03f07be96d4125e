// UTF-8 as the archive layer and the renderers read it: one decoder, so that
// "valid" means the same thing wherever a name or a text is judged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tsarchive {

// Length of the valid UTF-8 sequence at text[i] and its code point, or 0 when
// the byte there does not start one (stray continuation byte, overlong form,
// surrogate, above U+10FFFF, cut short). `i` must be inside `text`.
size_t utf8_sequence_at(std::string_view text, size_t i, uint32_t& cp);

// Appends code point `cp` (at most U+10FFFF) to `out` as UTF-8.
void append_utf8(std::string& out, uint32_t cp);

// True when all of `text` is valid UTF-8.
bool is_valid_utf8(std::string_view text);

// True when `text` is valid UTF-8 and has no control characters besides \t \n \r.
bool is_printable_utf8(std::string_view text);

}  // namespace tsarchive
