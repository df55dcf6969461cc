// The one translation unit with this checkout's paths compiled in
// (VAED_TEST_*, from tests/CMakeLists.txt).
#include "tests/common/test_paths.h"

#include <cstdlib>

namespace vaed::testing {

const char* SharedDir() {
  // The GPU check (scripts/gpu/check.sh) points the tests at the golden data
  // it carries, since ../shared does not travel to the device machine.
  const char* dir = std::getenv("VAED_SHARED_DIR");
  return dir != nullptr && *dir != '\0' ? dir : VAED_TEST_SHARED_DIR;
}
const char* SourceDir() { return VAED_TEST_SOURCE_DIR; }
const char* BinaryDir() { return VAED_TEST_BINARY_DIR; }
const char* VaectlPath() { return VAED_TEST_BINARY_DIR "/ops/vaectl/vaectl"; }
const char* VaedPath() { return VAED_TEST_BINARY_DIR "/daemon/vaed"; }

}  // namespace vaed::testing
