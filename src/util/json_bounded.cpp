// json_bounded.cpp — see json_bounded.hpp.
#include "util/json_bounded.hpp"

#include <algorithm>
#include <string>

namespace cnnscale {

int json_nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    else if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return deepest;
}

nlohmann::json parse_json(std::string_view text) {
  if (const int d = json_nesting_depth(text); d > kMaxJsonDepth)
    throw nlohmann::json::out_of_range::create(
        406, "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels (" + std::to_string(d) + ")", nullptr);
  return nlohmann::json::parse(text);
}

}  // namespace cnnscale
