// cmd_data_bench.cpp — `cnnscale data-bench`: how fast the training reader delivers a prepped
// data set on this node's cores and file system (data/data_bench.hpp), on every rank at
// once, without a model: images/s, images per CPU-second, bytes read per image and per second.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "comm/world.hpp"
#include "data/data_bench.hpp"
#include "train/progress.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace cnnscale::cli {

int cmd_data_bench(int argc, char** argv) {
  CommandSpec spec{
      "data-bench", "cnnscale data-bench --data DIR [options]",
      "Drives the training reader of a `cnnscale prep` data set (the same sampler, --cache, --augment,\n"
      "--data-threads and --prefetch as `cnnscale train`) as fast as it delivers batches, with no model,\n"
      "on every rank at once, and prints images/s, images per CPU-second (steady on a shared node), the\n"
      "bytes read from files per image and per second, and bytes read per delivered image byte. It\n"
      "answers: are these cores and this file system enough to feed N GPUs? docs/data.md.",
      "Examples:\n"
      "  cnnscale data-bench --data prep/imagenet --augment rrc224,hflip --data-threads 3\n"
      "  srun --mpi=pmix -N1 --ntasks-per-node=8 cnnscale data-bench --data prep/imagenet --augment rrc224,hflip \\\n"
      "      --data-threads 2 --json data-bench.json"};
  DataBenchOptions o;
  po::options_description desc("Options");
  desc.add_options()("data", po::value(&o.data.dir), "dataset directory written by `cnnscale prep`")(
      "augment", po::value(&o.data.augment)->default_value("none"),
      "training augmentation, as `cnnscale train --augment` (e.g. rrc224,hflip)")(
      "data-threads", po::value(&o.data.data_threads)->default_value(o.data.data_threads),
      "worker threads per rank beside the reader thread, as in train")(
      "jpeg-decode", po::value(&o.data.jpeg_decode)->default_value(o.data.jpeg_decode),
      "fast|exact, as in train (data sets of `prep --store jpeg`)")(
      "batch-size", po::value(&o.data.batch_per_rank)->default_value(64), "samples per rank per batch")(
      "cache", po::value(&o.data.cache)->default_value(o.data.cache), "none|memory, as in train")(
      "prefetch", po::value(&o.data.prefetch)->default_value(o.data.prefetch), "batches kept ready, as in train")(
      "seed", po::value(&o.data.seed)->default_value(o.data.seed), "the sampler's and augmentation's seed")(
      "batches", po::value(&o.batches)->default_value(o.batches), "batches timed per rank")(
      "warmup", po::value(&o.warmup)->default_value(o.warmup), "batches read first, untimed")(
      "json", po::value<std::string>(), "also write the results as JSON to this file (rank 0)");
  auto parsed = parse_options(spec, argc, argv, desc);
  if (parsed.help) {
    print_help(spec, desc);
    return 0;
  }
  if (o.data.dir.empty()) fail("data-bench: --data DIR is required (a directory written by `cnnscale prep`)");
  if (o.data.batch_per_rank < 1) fail("--batch-size must be at least 1, got ", o.data.batch_per_rank);
  if (o.data.data_threads < 1) fail("--data-threads must be at least 1, got ", o.data.data_threads);

  WorldOptions wo;
  wo.backend = Backend::mpi;  // the control plane only: no GPU, no data plane traffic
  World world = start_world(wo);
  const int rank = world.ctx.rank, size = world.ctx.size;
  // Before the benchmark: a path rank 0 cannot write the result to (util/atomic_file.hpp)
  // costs nothing; every rank learns it and stops.
  if (auto it = parsed.vm.find("json"); it != parsed.vm.end())
    world.control->rank0_check([&] { check_output_file(it->second.as<std::string>(), "--json"); }, "the --json check");
  const DataBenchResult r = run_data_bench(o, rank, size);

  // Every rank read at once: the job's rate is the sum, its time the slowest rank's.
  ControlComm& c = *world.control;
  struct Sums {
    double images, cpu_s, bytes, read, checksum, lock_wait, decode, augment, normalize;
  } sums{static_cast<double>(r.images),
         r.cpu_s,
         static_cast<double>(r.bytes_read),
         r.stages.read,
         r.stages.checksum,
         r.stages.lock_wait,
         r.stages.decode,
         r.stages.augment,
         r.stages.normalize};
  c.allreduce_fields(sums, ReduceOp::sum, "the data-bench summary");
  const double wall = c.allreduce(r.wall_s, ReduceOp::max, "the data-bench summary");
  const int bytes_known = c.allreduce(r.bytes_known ? 1 : 0, ReduceOp::min, "the data-bench summary");
  if (rank != 0) return 0;

  const double ips = wall > 0 ? sums.images / wall : 0, per_cpu = sums.cpu_s > 0 ? sums.images / sums.cpu_s : 0;
  const double per_image = sums.images > 0 ? sums.bytes / sums.images : 0;
  const double per_byte = r.image_bytes > 0 ? per_image / static_cast<double>(r.image_bytes) : 0;
  std::printf("cnnscale data-bench: %s, %d rank(s) on %d node(s), %d thread(s) per rank, batch %lld per rank, "
              "--augment %s, --cache %s\n",
              o.data.dir.c_str(), size, world.ctx.num_nodes, o.data.data_threads,
              static_cast<long long>(o.data.batch_per_rank), o.data.augment.c_str(), o.data.cache.c_str());
  // The samples by their kind: "images", or "volumes" (C×D×H×W) in the printed lines; the JSON
  // keys stay images_* for every kind.
  const std::string many = r.volumes ? "volumes" : "images", one = r.volumes ? "volume" : "image";
  const char *ns = many.c_str(), *n1 = one.c_str();
  std::printf("%.0f %s in %.2f s: %s %s/s (%s per rank), %s %s per CPU-second\n", sums.images, ns, wall,
              format_rate(ips).c_str(), ns, format_rate(ips / size).c_str(), format_rate(per_cpu).c_str(), ns);
  if (bytes_known)
    std::printf("read %.1f MB/s from files, %.1f KB per %s = %.2f bytes read per delivered %s byte (%lld B)\n",
                wall > 0 ? sums.bytes / wall / 1e6 : 0, per_image / 1e3, n1, per_byte, n1,
                static_cast<long long>(r.image_bytes));
  else std::printf("bytes read: not known (no /proc/self/io here)\n");
  // Where the reader threads' time went, per delivered image (the stages of the batches made
  // meanwhile, prefetched ones included, over the images delivered): reads on the wall clock,
  // the compute stages in CPU time, and the process's CPU time per image beside them (the rest
  // of it: reads' system time, sampling, copies, hand-offs between threads).
  const double us = sums.images > 0 ? 1e6 / sums.images : 0;
  std::printf("per %s: read %.1f us (wall), HDF5 lock wait %.1f us (wall); CPU: checksum %.1f us, decode %.1f us, "
              "augment %.1f us, normalise %.1f us, of %.1f us for the whole process\n",
              n1, sums.read * us, sums.lock_wait * us, sums.checksum * us, sums.decode * us, sums.augment * us,
              sums.normalize * us, sums.cpu_s * us);
  if (o.batches * o.data.batch_per_rank < r.epoch_images / 10)
    log_info("timed " + std::to_string(o.batches * o.data.batch_per_rank) + " of this rank's " +
             std::to_string(r.epoch_images) +
             " " + many + " per epoch; with --cache memory the first epoch reads the "
             "files and later ones do not — raise --batches to see both");
  if (auto it = parsed.vm.find("json"); it != parsed.vm.end()) {
    const nlohmann::json j = {
        {"tool", "cnnscale data-bench"},
        {"data", o.data.dir},
        {"world_size", size},
        {"nodes", world.ctx.num_nodes},
        {"ranks_per_node", world.ctx.local_size},
        {"data_threads", o.data.data_threads},
        {"batch_per_rank", o.data.batch_per_rank},
        {"augment", o.data.augment},
        {"cache", o.data.cache},
        {"jpeg_decode", o.data.jpeg_decode},
        {"prefetch", o.data.prefetch},
        {"batches", o.batches},
        {"warmup", o.warmup},
        {"images", static_cast<int64_t>(sums.images)},
        {"wall_s", wall},
        {"cpu_s", sums.cpu_s},
        {"images_per_s", ips},
        {"images_per_cpu_s", per_cpu},
        {"stages_us_per_image",
         {{"read", sums.read * us},
          {"checksum", sums.checksum * us},
          {"hdf5_lock_wait", sums.lock_wait * us},
          {"decode", sums.decode * us},
          {"augment", sums.augment * us},
          {"normalize", sums.normalize * us},
          {"process_cpu", sums.cpu_s * us}}},
        {"bytes_read", bytes_known ? nlohmann::json(sums.bytes) : nlohmann::json(nullptr)},
        {"bytes_read_per_image", bytes_known ? nlohmann::json(per_image) : nlohmann::json(nullptr)},
        {"read_per_image_byte", bytes_known ? nlohmann::json(per_byte) : nlohmann::json(nullptr)},
        {"image_bytes", r.image_bytes}};
    write_file_atomic(it->second.as<std::string>(), j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace cnnscale::cli
