// Where the tests of this checkout find things: ../shared (golden data and
// weights, read in place), the source tree, the build tree and the built
// programs. The paths are compiled into one translation unit
// (test_paths.cc) that the tests include this header for, so that all
// other test sources compile to the same bytes in any checkout: a fresh clone in another folder takes them
// from the compiler cache the session's own builds filled.
//
// SharedDir() is the environment's VAED_SHARED_DIR when that is set and not
// empty (the folder that holds golden/ and data/; the Python tests read the
// same variable), else the compiled-in <checkout>/../shared: the GPU check
// (scripts/gpu/check.sh) sets it to the golden data it carries, since
// ../shared does not travel to the device machine.
//
// Thread-safety: the functions return pointers to constant strings (the
// environment is read on each call; nothing here sets it).
#ifndef VAED_TESTS_COMMON_TEST_PATHS_H_
#define VAED_TESTS_COMMON_TEST_PATHS_H_

namespace vaed::testing {

const char* SharedDir();   // $VAED_SHARED_DIR, else <checkout>/../shared
const char* SourceDir();   // the checkout
const char* BinaryDir();   // the build directory
const char* VaectlPath();  // <build>/ops/vaectl/vaectl
const char* VaedPath();    // <build>/daemon/vaed

}  // namespace vaed::testing

// The names the tests use.
#define VAED_SHARED_DIR (::vaed::testing::SharedDir())
#define VAED_SOURCE_DIR (::vaed::testing::SourceDir())
#define VAED_BINARY_DIR (::vaed::testing::BinaryDir())
#define VAECTL_PATH (::vaed::testing::VaectlPath())
#define VAED_PATH (::vaed::testing::VaedPath())

#endif  // VAED_TESTS_COMMON_TEST_PATHS_H_
