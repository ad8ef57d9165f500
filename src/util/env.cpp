// env.cpp — see env.hpp.
#include "util/env.hpp"

#include <cerrno>
#include <cstdlib>

#include "util/error.hpp"

namespace cnnscale {

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

EnvLookup map_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

long parse_env_int(const std::string& name, const std::string& value) {
  if (value.empty()) fail("environment variable ", name, " is empty; expected a non-negative integer");
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(value.c_str(), &end, 10);
  if (errno != 0 || end == value.c_str() || *end != '\0' || v < 0)
    fail("environment variable ", name, "=", value,
         " is not a non-negative integer; the launcher environment is damaged (unset it or launch with srun/mpirun)");
  return v;
}

}  // namespace cnnscale
