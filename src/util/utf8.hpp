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

// Bytes a stranger sent (a rendezvous client's hello, the host it claims), for a message on a
// terminal: control bytes (below 0x20, 0x7F) and bytes from 0x80 up shown as \xHH, so that
// no escape sequence reaches the log; at most max_bytes of s, "..." marking a cut.
std::string escape_unprintable(const std::string& s, size_t max_bytes = std::string::npos);

}  // namespace cnnscale
