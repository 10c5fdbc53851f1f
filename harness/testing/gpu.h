// GPU tests skip, visibly, where no GPU is present (or the build has no
// CUDA); ctest marks them skipped by the message (SKIP_REGULAR_EXPRESSION).
#pragma once

#include <gtest/gtest.h>

#include "harness/device.h"

#define SEXTANT_SKIP_MESSAGE_NO_GPU "no CUDA device visible"

// In a TEST body: skip unless a GPU is usable, saying why.
#define SEXTANT_REQUIRE_GPU()                                                                           \
  do {                                                                                                  \
    if (!::sextant::cuda_built()) GTEST_SKIP() << SEXTANT_SKIP_MESSAGE_NO_GPU " (host-only build)";     \
    if (::sextant::cuda_device_count() == 0)                                                            \
      GTEST_SKIP() << SEXTANT_SKIP_MESSAGE_NO_GPU ": GPU test not run (cudaGetDeviceCount found none)"; \
  } while (0)
