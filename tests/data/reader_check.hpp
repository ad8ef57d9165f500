// reader_check.hpp — helpers shared by the reader tests: undo the normalisation of a
// batch and compare each image with the fixture bytes of its sample id.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "data/batch_source.hpp"
#include "data/dataset.hpp"
#include "data/fixture.hpp"

namespace cnnscale::test {

// Number of images in `b` whose pixels differ from fixture_pixel(id + id_offset, p).
inline int64_t wrong_images(const Batch& b, const DatasetInfo& info, int64_t id_offset = 0) {
  const int64_t numel = info.shape.numel(), plane = int64_t{info.shape.height} * info.shape.width;
  int64_t wrong = 0;
  for (int64_t k = 0; k < b.count; ++k) {
    for (int64_t p = 0; p < numel; ++p) {
      const int c = static_cast<int>(p / plane);
      const double u = (b.images[k * numel + p] * info.std[c] + info.mean[c]) * 255.0;
      if (std::lround(u) != fixture_pixel(b.sample_ids[k] + id_offset, p)) {
        ++wrong;
        break;
      }
    }
  }
  return wrong;
}

}  // namespace cnnscale::test
