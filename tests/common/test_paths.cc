// The one translation unit with this checkout's paths compiled in
// (VAED_TEST_*, from tests/CMakeLists.txt).
#include "tests/common/test_paths.h"

namespace vaed::testing {

const char* SharedDir() { return VAED_TEST_SHARED_DIR; }
const char* SourceDir() { return VAED_TEST_SOURCE_DIR; }
const char* BinaryDir() { return VAED_TEST_BINARY_DIR; }
const char* VaectlPath() { return VAED_TEST_BINARY_DIR "/ops/vaectl/vaectl"; }
const char* VaedPath() { return VAED_TEST_BINARY_DIR "/daemon/vaed"; }

}  // namespace vaed::testing
