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
  if (v > 2147483647L)
    fail("environment variable ", name, "=", value, " is beyond 2147483647, the largest rank or count cnnscale takes; "
         "the launcher environment is damaged (unset it or launch with srun/mpirun)");
  return v;
}

int parse_env_port(const std::string& name, const std::string& value) {
  if (value.empty()) fail("environment variable ", name, " is empty; expected a TCP port (1..65535)");
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (errno != 0 || end == value.c_str() || *end != '\0' || v < 1 || v > 65535)
    fail(name, "=", value, " is not a TCP port (1..65535): give the free port that rank 0 listens on, the same on "
         "every rank, e.g. ", name == "MASTER_PORT" ? "MASTER_PORT=29500" : "29500");
  return static_cast<int>(v);
}

}  // namespace cnnscale
