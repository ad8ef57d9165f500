// cmd_train.cpp — `cnnscale train`: its options (train_args.cpp: command line and --config
// INI → checked TrainOptions), then start_world() and a Trainer on it.
#include "cli/commands.hpp"
#include "cli/train_args.hpp"
#include "comm/make_communicator.hpp"
#include "comm/world.hpp"
#include "launch/rank_cores.hpp"
#include "nn/model.hpp"
#include "nn/threads.hpp"
#include "train/trainer.hpp"
#include "util/error.hpp"
#include "util/stop_signal.hpp"

namespace cnnscale::cli {

int cmd_train(int argc, char** argv) {
  TrainArgs a = parse_train_args(argc, argv, nn::default_threads());
  if (a.help) return 0;
  TrainOptions& o = a.o;
  o.backend = parse_backend(a.backend);
  install_stop_signal_handlers();  // from here a SIGTERM/SIGUSR1 waits for the next step boundary

  WorldOptions wo;
  wo.backend = o.backend;
  wo.device = parse_device(a.device);
  wo.timeout_s = o.collective_timeout;
  wo.run_dir = o.run_dir;
  World world = start_world(wo);
  // A rank that trains on a GPU (the communicator works on device buffers: the Trainer
  // then builds the GPU model) feeds it from every core it may use but the training
  // thread's (launch/rank_cores.hpp), unless --data-threads was given (command line or
  // --config). Each rank decides for itself: the batches are the same for any count.
  if (a.data_threads_defaulted && world.comm->device_buffers())
    o.data.data_threads = gpu_default_data_threads(this_rank_cpus(world.ctx.local_size));
  Trainer trainer(o, world);
  return trainer.run();
}

}  // namespace cnnscale::cli
