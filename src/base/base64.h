// Standard base64 (RFC 4648, with '=' padding): binary content as text, for
// JSON documents and for the extra/ files of a .pt2, which PyTorch's loader
// decodes as UTF-8.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tsarchive {

std::string base64_encode(std::string_view bytes);

// The bytes `text` encodes. ASCII whitespace (a line break a text editor or
// `base64` wrapped in) is skipped; anything else outside the alphabet, a
// length that is not a multiple of 4 or misplaced padding gives an empty
// optional, with `problem` (when given) saying what and where.
std::optional<std::string> base64_decode(std::string_view text, std::string* problem = nullptr);

}  // namespace tsarchive
