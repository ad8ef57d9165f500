// utf8.hpp — where a byte string stops being UTF-8 (JSON files hold UTF-8 text only:
// nlohmann::json's dump throws on anything else, after the work that produced it).
#pragma once
#include <cstddef>
#include <string>

namespace cnnscale {

// The offset of the first byte of s that does not belong to a well-formed UTF-8 sequence
// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), or npos when s
// is UTF-8 throughout.
size_t first_invalid_utf8(const std::string& s);

// s with every byte from 0x80 up shown as \xHH (for messages about such strings).
std::string escape_non_ascii(const std::string& s);

}  // namespace cnnscale
