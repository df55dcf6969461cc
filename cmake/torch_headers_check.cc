// Compiles only when <fmt/core.h> and protobuf's headers are Debian's (fmt
// 9, protobuf 3.21.12: what spdlog and vaed.pb.h are built against), not
// the copies bundled in LibTorch's include folder (fmt 11, an older
// protobuf). cmake/libtorch.cmake compiles it with vaed_torch's include
// folders first; tests/cmake/torch_headers_test.sh with the wheel's own.
#include <fmt/core.h>
#include <google/protobuf/stubs/common.h>
#if FMT_VERSION >= 100000
#error LibTorch's bundled fmt shadows Debian's
#endif
#if GOOGLE_PROTOBUF_VERSION != 3021012
#error LibTorch's bundled protobuf shadows Debian's
#endif
int main() { return 0; }
