#!/usr/bin/env bash
# device_seam.sh — the device seam (docs/architecture.md, seam 3) holds in the sources:
# CUDA code only in src/<module>/cuda/, no CNNSCALE_HAVE_CUDA in C++ at all (the build
# defines no such macro any more, so an #ifdef on it would silently take the CPU side),
# CUDA headers included only under cuda/ (or by the gpu tests, their main
# tests/common/gpu_gtest_main.cpp and its CUDA-build-only test tests/nn/test_gpu_test_main.cpp,
# the CUDA-build-only tests of src/*/cuda/ code under tests/*/cuda/,
# the batch-norm kernels' CPU emulation tests/nn/test_bn_emulated.cpp,
# and the kernels' development benches bench/kernels/*.cu, GPU-KERNELS.md's method), and nn
# includes neither data nor comm nor launch.
source "$CNNSCALE_SOURCE/tests/lib.sh"
cd "$CNNSCALE_SOURCE" || exit 1
srcs() { git ls-files -- 'src/*.cpp' 'src/*.hpp' 'src/*.cu' 'tests/*.cpp' 'tests/*.hpp' 'bench/*.cpp' 'bench/*.hpp' 'bench/*.cu' 2>/dev/null ||
         find src tests bench -name '*.cpp' -o -name '*.hpp' -o -name '*.cu'; }
expect_eq "no CNNSCALE_HAVE_CUDA in C++ sources" "" "$(srcs | xargs grep -ln 'CNNSCALE_HAVE_CUDA')"
expect_eq "CUDA headers only under src/*/cuda/ (and the gpu tests)" "" \
  "$(srcs | grep -v '/cuda/' | grep -v '_gpu\.cpp$' | grep -vx 'tests/common/gpu_gtest_main\.cpp' |
     grep -vx 'tests/nn/test_gpu_test_main\.cpp' | grep -vx 'tests/nn/test_bn_emulated\.cpp' | grep -v '^bench/kernels/' |
     xargs grep -lE '#include <(cuda_runtime|cuda|cudnn|cublas_v2|nccl)\.h>')"
expect_eq ".cu files only under src/*/cuda/ and bench/kernels/" "" \
  "$(srcs | grep '\.cu$' | grep -v '^src/[a-z]*/cuda/' | grep -v '^bench/kernels/')"
expect_eq "nn includes no data/, comm/ or launch/ header" "" \
  "$(srcs | grep '^src/nn/' | xargs grep -lE '#include "(data|comm|launch)/')"
expect_eq "no <mpi.h> under src/*/cuda/*.cu" "" "$(srcs | grep '^src/[a-z]*/cuda/.*\.cu$' | xargs -r grep -l 'mpi')"
finish
