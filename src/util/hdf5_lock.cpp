// hdf5_lock.cpp — see hdf5_lock.hpp.
#include "util/hdf5_lock.hpp"

namespace cnnscale {

std::recursive_mutex& hdf5_mutex() {
  static std::recursive_mutex m;
  return m;
}

}  // namespace cnnscale
