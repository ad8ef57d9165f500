// user_error.hpp — the message of the UserError a call throws, for tests that check
// what a user is told (one helper instead of a copy per test file).
#pragma once
#include <functional>
#include <string>

#include "util/error.hpp"

namespace cnnscale::test {

// f's UserError message, or `if_none` when f returns normally.
inline std::string user_error_of(const std::function<void()>& f, const std::string& if_none = "") {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return if_none;
}

}  // namespace cnnscale::test
