#include "harness/blas.h"

#include <gtest/gtest.h>

#include <thread>

namespace sextant {
namespace {

// Unbound ranks share the node's cores; a rank bound to one core (mpirun's
// default at 1 or 2 ranks) runs one thread, not the node's share.
TEST(BlasThreads, ShareTheNodeButNoMoreThanTheRankMayRunOn) {
  EXPECT_EQ(blas_threads_for(0, 16, 16, 4), 4);
  EXPECT_EQ(blas_threads_for(0, 2, 2, 1), 2);
  EXPECT_EQ(blas_threads_for(0, 2, 1, 1), 1);  // mpirun -np 1 on 2 cores, bound to one
  EXPECT_EQ(blas_threads_for(0, 2, 2, 8), 1);  // oversubscribed: at least 1
  EXPECT_EQ(blas_threads_for(0, 16, 2, 2), 2);
}

TEST(BlasThreads, ARequestIsCappedAtTheCoresAllowed) {
  EXPECT_EQ(blas_threads_for(3, 16, 16, 8), 3);
  EXPECT_EQ(blas_threads_for(8, 16, 4, 1), 4);
  EXPECT_EQ(blas_threads_for(8, 16, 0, 1), 1);
}

TEST(BlasThreads, CoresAllowedIsWithinTheMachine) {
  EXPECT_GE(cores_allowed(), 1);
  EXPECT_LE(cores_allowed(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace sextant
