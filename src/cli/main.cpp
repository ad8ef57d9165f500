// main.cpp — `cnnscale <command> [options]`: dispatch, --version, and the one place
// where errors become "cnnscale: error: ..." (or "cnnscale: internal error: ...") and an
// exit status: 2 for a UserError, 3 for an InternalError.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <thread>

#include "cli/commands.hpp"
#include "launch/bootstrap.hpp"
#include "util/build_info.hpp"
#include "util/error.hpp"
#include "util/memory.hpp"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

const Command kCommands[] = {
    {"train", cnnscale::cli::cmd_train, "data-parallel CNN training (synthetic or a `prep` data set)"},
    {"prep", cnnscale::cli::cmd_prep, "convert a data set (IDX, HDF5, CIFAR-10/100, image folders) into sharded HDF5"},
    {"allreduce", cnnscale::cli::cmd_allreduce, "collective benchmark with nccl-tests columns and a correctness check"},
    {"data-bench", cnnscale::cli::cmd_data_bench, "how fast the training reader delivers a prep data set (no model)"},
    {"report", cnnscale::cli::cmd_report, "scaling analysis of run directories (tables, charts, a recommendation)"},
    {"watch", cnnscale::cli::cmd_watch, "a running job's progress from its run directory, as a live table"},
    {"export", cnnscale::cli::cmd_export, "a trained model (run directory or checkpoint) as an ONNX file for inference"},
    {"env", cnnscale::cli::cmd_env, "one line per rank: launcher, rank, size, local rank, node, host, device, backend"},
};

void usage(FILE* out) {
  std::fprintf(out,
               "Usage: cnnscale <command> [options]\n\n"
               "Data-parallel CNN training and scaling analysis for Slurm clusters.\n"
               "Launch with `srun --mpi=pmix cnnscale ...`, `mpirun -n N cnnscale ...`, or alone.\n\n"
               "Commands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-11s %s\n", c.name, c.summary);
  std::fprintf(out,
               "\n`cnnscale <command> --help` documents each command.\n"
               "`cnnscale --version` prints the version and the build's features.\n");
}

// Ends the whole job with `status`: MPI_Abort when other ranks exist (they may be inside
// a collective this rank will never join), else a normal MPI finalize.
int end_job(int status) {
  if (cnnscale::mpi_active()) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, status);
  }
  cnnscale::finalize_mpi();
  return status;
}

// Prints a user error once and returns the exit status (after MPI_Abort when other
// ranks may be waiting). Before MPI starts, ranks cannot compare errors: the launcher's
// rank 0 prints at once; another rank first pauses, so that when rank 0 has the same
// error (and exits) the launcher (mpirun, srun --kill-on-bad-exit) ends this one and
// the error shows once; an error of this rank only (a node-local file) is then printed
// with its rank and host while rank 0 waits for it in MPI_Init (docs/launch.md).
// After MPI starts, an error that reaches here is this rank's own (the ones every rank
// finds alike are CollectiveErrors): a rank other than 0 names itself and its host, so
// that a user can tell which node holds the bad file or shard.
int report_user_error(const std::string& what) {
  if (cnnscale::mpi_active()) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0 || size == 1 || what.rfind("rank ", 0) == 0) {
      cnnscale::print_error(what);
    } else {
      char host[256] = {0};
      gethostname(host, sizeof(host) - 1);
      cnnscale::print_error("rank " + std::to_string(rank) + " on " + host + ": " + what);
    }
    return end_job(cnnscale::kUserErrorStatus);
  }
  const int launcher_rank = cnnscale::launcher_rank_or_zero();
  if (launcher_rank == 0) {
    cnnscale::print_error(what);
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    cnnscale::print_error("rank " + std::to_string(launcher_rank) + " on " + host + ": " + what);
  }
  return end_job(cnnscale::kUserErrorStatus);
}

}  // namespace

int main(int argc, char** argv) {
  // A write to a socket whose peer is gone (a rank that died, over Gloo's TCP pairs or
  // the rendezvous store) must fail that write with EPIPE, which the transport reports
  // as an error naming the collective, not kill this rank with SIGPIPE and no word
  // (torchrun then showed "exitcode: -13" for the survivor). Python, and so PyTorch's
  // workers, ignore SIGPIPE the same way.
  std::signal(SIGPIPE, SIG_IGN);
  if (argc < 2) {
    usage(stderr);
    return cnnscale::kUserErrorStatus;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    usage(stdout);
    return 0;
  }
  if (cmd == "--version") {
    std::printf("cnnscale %s (%s)\n", CNNSCALE_VERSION, cnnscale::build_features());
    return 0;
  }
  const Command* found = nullptr;
  for (const auto& c : kCommands)
    if (cmd == c.name) found = &c;
  int status = 0;
  try {
    if (!found)
      cnnscale::fail("unknown command '", cmd, "'; commands are train, prep, allreduce, data-bench, report, watch, env (see `cnnscale --help`)");
    status = found->run(argc - 1, argv + 1);
  } catch (const cnnscale::CollectiveError& e) {
    // Every rank found the same mistake: rank 0 says it once, all leave cleanly.
    if (!cnnscale::mpi_active() ? cnnscale::launcher_rank_or_zero() == 0 : e.rank() == 0)
      cnnscale::print_error(e.what());
    cnnscale::finalize_mpi();
    return cnnscale::kUserErrorStatus;
  } catch (const cnnscale::UserError& e) {
    return report_user_error(e.what());
  } catch (const std::bad_alloc&) {  // an allocation no check_memory()/allocating() sized
    return report_user_error(cnnscale::out_of_memory_message(
        "running `cnnscale " + cmd + "`", 0, "ask for less (batch size, model, sizes) or run with more memory"));
  } catch (const cnnscale::InternalError& e) {
    // A bug, found by this rank and maybe by no other: say so, and end the whole job.
    cnnscale::print_internal_error(e.what());
    return end_job(cnnscale::kInternalErrorStatus);
  } catch (const std::exception& e) {
    // Any other exception (a library's): a bug of ours not to have turned it into one of
    // the above. End the whole job as for an InternalError, not std::terminate's abort.
    cnnscale::print_internal_error(std::string("unexpected exception: ") + e.what());
    return end_job(cnnscale::kInternalErrorStatus);
  }
  cnnscale::finalize_mpi();
  return status;
}
