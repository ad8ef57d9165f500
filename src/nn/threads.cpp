// threads.cpp — oneDNN/OpenMP thread count per rank (see threads.hpp).
#include "nn/threads.hpp"

#include <omp.h>

#include <atomic>
#include <cstdlib>

namespace cnnscale::nn {
namespace {
std::atomic<bool> configured{false};
}

void set_threads(int n) {
  omp_set_num_threads(n < 1 ? 1 : n);
  configured = true;
}

int threads() { return omp_get_max_threads(); }

int default_threads() {
  if (const char* v = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (end != v && n >= 1 && n <= 4096) return static_cast<int>(n);
  }
  return 1;
}

void ensure_threads() {
  if (!configured.exchange(true)) omp_set_num_threads(default_threads());
}

}  // namespace cnnscale::nn
