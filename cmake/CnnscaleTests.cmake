# Test helpers. Labels: unit, mpi, slurm, convergence, gpu (SKIP without a device).
include(GoogleTest)
set(CNNSCALE_MPIEXEC ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe --bind-to none)

# cnnscale_gtest(name SOURCES ... LIBS ... [MPI_MAIN|GPU_MAIN]) builds a GoogleTest executable.
# GPU_MAIN: a main that exits 77 when every test skipped and turns a failed CUDA/cuDNN/
# cuBLAS check into a failed test case (tests/common/gpu_gtest_main.cpp); CUDA builds only.
function(cnnscale_gtest name)
  cmake_parse_arguments(A "MPI_MAIN;GPU_MAIN" "" "SOURCES;LIBS" ${ARGN})
  if(A_MPI_MAIN)
    add_executable(${name} ${A_SOURCES} ${PROJECT_SOURCE_DIR}/tests/common/mpi_gtest_main.cpp)
    target_link_libraries(${name} PRIVATE GTest::gtest ${A_LIBS})
  elseif(A_GPU_MAIN)
    add_executable(${name} ${A_SOURCES} ${PROJECT_SOURCE_DIR}/tests/common/gpu_gtest_main.cpp)
    target_link_libraries(${name} PRIVATE GTest::gtest cnnscale_util cnnscale::cuda_stack ${A_LIBS})
  else()
    add_executable(${name} ${A_SOURCES})
    target_link_libraries(${name} PRIVATE GTest::gtest GTest::gtest_main ${A_LIBS})
  endif()
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  cnnscale_target_defaults(${name})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
endfunction()

# A unit test: one process.
function(cnnscale_unit_test name)
  cnnscale_gtest(${name} ${ARGN})
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 300)
endfunction()

# An MPI test: the same gtest executable under mpiexec with each rank count given.
function(cnnscale_mpi_test name)
  cmake_parse_arguments(A "" "" "SOURCES;LIBS;RANKS" ${ARGN})
  cnnscale_gtest(${name} MPI_MAIN SOURCES ${A_SOURCES} LIBS ${A_LIBS})
  foreach(np ${A_RANKS})
    add_test(NAME ${name}_np${np} COMMAND ${CNNSCALE_MPIEXEC} -n ${np} $<TARGET_FILE:${name}>)
    set_tests_properties(${name}_np${np} PROPERTIES LABELS mpi TIMEOUT 600 PROCESSORS ${np})
  endforeach()
endfunction()

# A GPU test: SKIPs (CTest) when the executable reports no device.
function(cnnscale_gpu_test name)
  cmake_parse_arguments(A "" "" "SOURCES;LIBS;RANKS" ${ARGN})
  if(NOT A_RANKS)
    cnnscale_gtest(${name} GPU_MAIN SOURCES ${A_SOURCES} LIBS ${A_LIBS})
    add_test(NAME ${name} COMMAND ${name})
    set_tests_properties(${name} PROPERTIES LABELS gpu TIMEOUT 600 SKIP_RETURN_CODE 77)
  else()
    cnnscale_gtest(${name} MPI_MAIN SOURCES ${A_SOURCES} LIBS ${A_LIBS})
    foreach(np ${A_RANKS})
      add_test(NAME ${name}_np${np} COMMAND ${CNNSCALE_MPIEXEC} -n ${np} $<TARGET_FILE:${name}>)
      set_tests_properties(${name}_np${np} PROPERTIES LABELS gpu TIMEOUT 600 SKIP_RETURN_CODE 77)
    endforeach()
  endif()
endfunction()

# A shell-script test (tests/**/*.sh) that drives the built executable.
# Arguments after the label are passed to the script.
function(cnnscale_script_test name script label)
  add_test(NAME ${name} COMMAND bash ${script} ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS ${label} TIMEOUT 900
    ENVIRONMENT "CNNSCALE=$<TARGET_FILE:cnnscale>;CNNSCALE_SOURCE=${PROJECT_SOURCE_DIR};CNNSCALE_BUILD=${CMAKE_BINARY_DIR};MPIEXEC=${MPIEXEC_EXECUTABLE}"
    SKIP_RETURN_CODE 77)
endfunction()
