// cmd_allreduce.cpp — `cnnscale allreduce`: all_reduce_perf-style benchmark of the
// communicator training uses (MPI on CPUs, NCCL on GPUs).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "comm/allreduce_bench.hpp"
#include "comm/make_communicator.hpp"
#include "comm/rank_memory.hpp"
#include "comm/world.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace cnnscale::cli {

int cmd_allreduce(int argc, char** argv) {
  CommandSpec spec{
      "allreduce", "cnnscale allreduce [options]",
      "Times in-place sum allreduce over a size sweep on every rank, in the manner of nccl-tests'\n"
      "all_reduce_perf, and checks each size against exactly predictable sums (any wrong element\n"
      "fails the run). busbw = algbw * 2(n-1)/n is comparable across rank counts.",
      "Examples:\n  mpirun -n 2 cnnscale allreduce -b 8 -e 64M -f 2\n"
      "  srun -N4 --ntasks-per-node=8 cnnscale allreduce --level cross --json cross-4.json   (for `cnnscale report`)\n"
      "  srun --mpi=pmix -N2 cnnscale allreduce -d bfloat16 --json allreduce.json"};
  po::options_description desc("Options");
  desc.add_options()("minbytes,b", po::value<std::string>()->default_value("8"),
                     "smallest size (bytes; K/M/G allowed)")(
      "maxbytes,e", po::value<std::string>()->default_value("32M"), "largest size")(
      "stepfactor,f", po::value<double>()->default_value(2.0), "multiply the size by this each step")(
      "warmup_iters,w", po::value<int>()->default_value(5), "untimed iterations per size")(
      "iters,n", po::value<int>()->default_value(20), "timed iterations per size")(
      "check,c", po::value<int>()->default_value(1), "check results (1) or not (0)")(
      "datatype,d", po::value<std::string>()->default_value("float"), "float|bfloat16")(
      "backend", po::value<std::string>()->default_value("auto"),
      "auto|mpi|nccl|gloo (auto: MPI under srun/mpirun, Gloo under torchrun-style variables or TF_CONFIG)")(
      "device", po::value<std::string>()->default_value("auto"),
      "auto|cuda|cpu, as `cnnscale train --device`: cuda with --backend mpi or gloo times the host data plane of GPU "
      "ranks (device buffers staged through pinned host memory; --level world only; not yet run on a GPU)")(
      "collective-timeout", po::value<double>()->default_value(300),
      "seconds the gloo rendezvous and each of its collectives may wait for a rank")(
      "level", po::value<std::string>()->default_value("world"),
      "world: sum over every rank; node: over the ranks of each node; cross: over the ranks of equal local rank, "
      "one per node (all at once) -- the two levels of the hierarchical gradient sum, for `cnnscale report`")(
      "json", po::value<std::string>(), "also write the results as JSON to this file (rank 0)");
  auto parsed = parse_options(spec, argc, argv, desc);
  if (parsed.help) {
    print_help(spec, desc);
    return 0;
  }
  const auto& vm = parsed.vm;
  AllreduceBenchOptions o;
  o.min_bytes = parse_size("--minbytes", vm["minbytes"].as<std::string>());
  o.max_bytes = parse_size("--maxbytes", vm["maxbytes"].as<std::string>());
  o.factor = vm["stepfactor"].as<double>();
  o.warmup = vm["warmup_iters"].as<int>();
  o.iters = vm["iters"].as<int>();
  o.check = vm["check"].as<int>() != 0;
  const std::string dt = vm["datatype"].as<std::string>();
  if (dt == "float" || dt == "f32" || dt == "fp32") o.dtype = DType::f32;
  else if (dt == "bfloat16" || dt == "bf16") o.dtype = DType::bf16;
  else fail("--datatype ", dt, " is not supported; use float or bfloat16");
  if (o.min_bytes > o.max_bytes) fail("--minbytes is larger than --maxbytes");
  if (o.factor < 1.0) fail("--stepfactor must be at least 1");
  if (o.iters < 1 || o.warmup < 0) fail("--iters must be at least 1 and --warmup_iters at least 0");

  const std::string level_opt = vm["level"].as<std::string>();
  if (level_opt != "world" && level_opt != "node" && level_opt != "cross")
    fail("--level ", level_opt,
         " is not known; use world, node (the ranks of each node) or cross (one rank per node, "
         "equal local rank)");
  WorldOptions wo;
  wo.backend = parse_backend(vm["backend"].as<std::string>());
  wo.device = parse_device(vm["device"].as<std::string>());
  if (wo.device == DeviceRequest::cuda && (wo.backend == Backend::mpi || wo.backend == Backend::gloo) &&
      level_opt != "world")
    fail("--level ", level_opt, " with --device cuda --backend ", backend_name(wo.backend),
         ": the host data plane of GPU ranks is timed over the whole world only; drop --level or --device cuda");
  wo.timeout_s = vm["collective-timeout"].as<double>();
  if (!(wo.timeout_s > 0)) fail("--collective-timeout must be positive (seconds)");
  World world = start_world(wo);
  const ProcessContext& ctx = world.ctx;
  // Before the sweep: a path rank 0 cannot write the result to (util/atomic_file.hpp) costs
  // nothing; every rank learns it and stops.
  if (vm.count("json"))
    world.control->rank0_check([&] { check_output_file(vm["json"].as<std::string>(), "--json"); }, "the --json check");
  // The training's watchdog (comm/watchdog.hpp): a rank stopped or hung in a sum is named
  // within --collective-timeout instead of the others waiting forever.
  if (!world.control->start_watchdog(wo.timeout_s, ctx.host, world.comm->device_buffers()) && ctx.size > 1)
    log_warn("the MPI library gives less than MPI_THREAD_MULTIPLE, so the --collective-timeout watchdog is off");
  const std::string level = vm["level"].as<std::string>();
  std::unique_ptr<Communicator> level_comm;
  if (level != "world") level_comm = make_level_communicator(wo.backend, ctx, level);
  Communicator* comm = level_comm ? level_comm.get() : world.comm.get();
  // Before any timing: each rank holds one host buffer of the largest size.
  check_memory_on_all_ranks(MPI_COMM_WORLD,
                            "allocating the allreduce buffer for --maxbytes " + vm["maxbytes"].as<std::string>(),
                            sweep_sizes(o).back(), "lower -e/--maxbytes, or run with more memory per rank");
  const bool root = ctx.rank == 0;
  if (root) {
    if (level == "world")
      std::printf("# cnnscale allreduce: %d ranks on %d node(s), backend %s%s, in-place sum, %s\n", comm->size(),
                  ctx.num_nodes, backend_name(comm->backend()),
                  comm->device_buffers() && comm->backend() != Backend::nccl ? " (GPU buffers over the host data plane)"
                                                                             : "",
                  o.check ? "checked" : "not checked");
    else
      std::printf("# cnnscale allreduce --level %s: sums over %d ranks each (launch: %d ranks on %d node(s)), "
                  "backend %s, in-place sum, %s\n",
                  level.c_str(), comm->size(), ctx.size, ctx.num_nodes, backend_name(comm->backend()),
                  o.check ? "checked" : "not checked");
    std::printf("#%12s %12s %9s %11s %12s %12s %7s\n", "size(B)", "count", "type", "time(us)", "algbw(GB/s)",
                "busbw(GB/s)", "#wrong");
    std::fflush(stdout);
  }
  nlohmann::json results = nlohmann::json::array();
  long total_wrong = 0;
  double busbw_sum = 0;
  int n = 0;
  for (size_t bytes : sweep_sizes(o)) {
    AllreduceResult r = run_allreduce_size(*comm, bytes, o, world.control.get());
    if (r.wrong > 0) total_wrong += r.wrong;
    busbw_sum += r.busbw_gbs;
    ++n;
    if (root) {
      std::printf(" %12zu %12zu %9s %11.2f %12.3f %12.3f %7s\n", r.bytes, r.count, dtype_name(o.dtype), r.time_us,
                  r.algbw_gbs, r.busbw_gbs, r.wrong < 0 ? "N/A" : std::to_string(r.wrong).c_str());
      std::fflush(stdout);
    }
    results.push_back({{"size", r.bytes},
                       {"count", r.count},
                       {"type", dtype_name(o.dtype)},
                       {"time_us", r.time_us},
                       {"algbw_gbs", r.algbw_gbs},
                       {"busbw_gbs", r.busbw_gbs},
                       {"wrong", r.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.wrong)}});
  }
  const double avg_busbw = n ? busbw_sum / n : 0;
  if (root) {
    std::printf("# Out of bounds values : %ld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %.4f GB/s\n", avg_busbw);
    if (vm.count("json")) {
      nlohmann::json j = {{"tool", "cnnscale allreduce"},
                          {"world_size", comm->size()},
                          {"nodes", ctx.num_nodes},
                          {"ranks_per_node", ctx.local_size},
                          {"level", level},
                          {"backend", backend_name(comm->backend())},
                          {"type", dtype_name(o.dtype)},
                          {"results", results},
                          {"avg_busbw_gbs", avg_busbw},
                          {"wrong_total", total_wrong}};
      write_file_atomic(vm["json"].as<std::string>(), j.dump(2) + "\n");
    }
  }
  if (total_wrong > 0) {
    if (root)
      print_error("allreduce produced " + std::to_string(total_wrong) +
                  " wrong element(s): the communicator or the network is corrupting data");
    return 1;
  }
  return 0;
}

}  // namespace cnnscale::cli
