// Compile checks only (cmake/torch_cuda.cmake): Debian's CPU LibTorch ships
// the c10/cuda headers without this generated one, which a CUDA LibTorch
// has. It holds one switch: c10_cuda is a shared library.
#pragma once
#define C10_CUDA_BUILD_SHARED_LIBS
