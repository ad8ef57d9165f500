// env.hpp — read access to environment variables through a replaceable lookup, so
// that launcher detection can be unit-tested with a made-up environment.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace cnnscale {

// Returns the variable's value, or nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The process environment (getenv).
EnvLookup process_env();
// A fixed map, for tests.
EnvLookup map_env(std::map<std::string, std::string> vars);

// Parses a non-negative integer environment value; throws UserError naming the
// variable when it is not one (e.g. SLURM_PROCID=abc).
long parse_env_int(const std::string& name, const std::string& value);

}  // namespace cnnscale
