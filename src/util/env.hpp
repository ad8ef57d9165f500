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

// Parses a non-negative integer environment value of at most 2147483647 (an int: ranks,
// sizes, counts); throws UserError naming the variable when it is not one (e.g.
// SLURM_PROCID=abc, WORLD_SIZE=99999999999, which would otherwise wrap around).
long parse_env_int(const std::string& name, const std::string& value);

// Parses a TCP port, 1..65535 (MASTER_PORT, TF_CONFIG's "host:port"); throws UserError
// naming the variable otherwise (4294967297 once became port 1, and 0 read as "not set").
int parse_env_port(const std::string& name, const std::string& value);

}  // namespace cnnscale
