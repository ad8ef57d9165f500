// commands.hpp — the subcommands of `cnnscale`. Each takes the arguments after its
// name (argv[0] is the subcommand name) and returns the process exit status.
// User mistakes are thrown as UserError; main() prints them.
#pragma once

namespace cnnscale::cli {

int cmd_train(int argc, char** argv);
int cmd_prep(int argc, char** argv);
int cmd_allreduce(int argc, char** argv);
int cmd_data_bench(int argc, char** argv);
int cmd_report(int argc, char** argv);
int cmd_env(int argc, char** argv);
int cmd_watch(int argc, char** argv);
int cmd_export(int argc, char** argv);

}  // namespace cnnscale::cli
