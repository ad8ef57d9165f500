// threads.hpp — how many threads oneDNN (OpenMP runtime in Debian's build) uses per
// rank. The trainer runs one rank per core, so the default is 1 unless OMP_NUM_THREADS
// says otherwise.
#pragma once

namespace cnnscale::nn {

// Sets oneDNN's thread count for this process (omp_set_num_threads).
void set_threads(int n);
// Threads in use.
int threads();
// The default: OMP_NUM_THREADS when set (and valid), else 1.
int default_threads();
// Applies default_threads() once, unless set_threads was called before.
void ensure_threads();

}  // namespace cnnscale::nn
