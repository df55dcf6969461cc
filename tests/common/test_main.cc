// main() of every GoogleTest binary: the daemon's process-wide numerics
// first (MKL set up for reproducible decodes, daemon/models/mkl_reproducibility.h), so
// that tests decoding in-process see the daemon's bytes; then GoogleTest
// and GoogleMock as gtest_main / gmock_main would run them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "daemon/models/mkl_reproducibility.h"

int main(int argc, char** argv) {
  (void)vaed::models::SetUpMklForReproducibleDecodes();
  testing::InitGoogleMock(&argc, argv);
  return RUN_ALL_TESTS();
}
