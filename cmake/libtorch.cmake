# vaed's one LibTorch: the LibTorch inside PyPI's torch 2.11.0 wheel (its
# CUDA 13.0 build), the same torch the GPU machines' python3 and the DiT
# workers run. scripts/fetch-libtorch.sh installs it into a venv whose
# site-packages is VAED_LIBTORCH_PREFIX (torch/include, torch/lib,
# torch/share/cmake, and nvidia/*/lib beside torch/, where the libraries'
# RPATHs look); any site-packages holding torch 2.11 works too (the GPU
# machine's, for instance).
#
# Defines the INTERFACE target vaed_torch, what every source that includes
# LibTorch links: torch_cpu + c10 with the C++ API's include folder and
# torch_cpu's compile definitions. It is the same in CPU and GPU builds, so a
# shared source compiles with the same flags in both and the compiler cache
# serves the GPU build from the CPU build's objects (scripts/cuda-build.sh).
# GPU builds link LibTorch's CUDA side only through their CUDA sources
# (cmake/cuda_sources.cmake): VAED_TORCH_CUDA_LIBS is torch_cuda_library,
# which links libtorch_cuda.so --no-as-needed (LibTorch registers its CUDA
# backend when that library loads, whether or not a symbol of it is used).
# torch_cuda's own compile definitions (USE_C10D_NCCL, USE_NVSHMEM) stay
# off every source: vaed includes no header that reads them.
#
# Configuring needs the CUDA toolkit, the CPU build's too: the wheel's
# TorchConfig.cmake finds it (Caffe2's public/cuda.cmake). Running does not:
# libtorch_cpu.so needs only libcudart.so.13 and libcupti.so.13 of CUDA,
# which fetch-libtorch.sh puts beside it from their PyPI wheels.
#
# Header hygiene: the wheel ships fmt 11 (torch/include/fmt) and an old
# protobuf (torch/include/google), and LibTorch's include folder comes
# before /usr/include on the compile line. Debian's spdlog is built against
# Debian's fmt 9 and vaed.pb.h comes from Debian's protoc 3.21, so either
# folder seen first breaks them. vaed_torch's include folder is therefore a
# view of LibTorch's (one symbolic link per entry, in the build folder)
# without those two; the check below fails the configure if, with
# vaed_torch's include folders, <fmt/core.h> or protobuf's headers are not
# Debian's.
set(VAED_LIBTORCH_PREFIX "/opt/vaed/torch-2.11.0/lib/python3.11/site-packages" CACHE PATH
    "site-packages holding torch 2.11 (scripts/fetch-libtorch.sh --print-prefix)")
list(PREPEND CMAKE_PREFIX_PATH "${VAED_LIBTORCH_PREFIX}/torch")
# The venv's python3 (Debian's interpreter, which also imports this torch:
# the Python tests run under it and client/python builds its extension for
# it), chosen before TorchConfig.cmake, which looks for a Python too and
# would otherwise take the first python3 on PATH.
if(NOT Python_EXECUTABLE AND EXISTS "${VAED_LIBTORCH_PREFIX}/../../../bin/python3")
  get_filename_component(Python_EXECUTABLE "${VAED_LIBTORCH_PREFIX}/../../../bin/python3" ABSOLUTE)
endif()
# TorchConfig.cmake picks nvcc architecture flags, by default by running a
# probe of the installed GPUs, which fails to configure on a machine without
# one. vaed compiles no CUDA kernels (its CUDA sources are C++ against the
# runtime API), so the list only has to be valid: the H100/H200 (9.0) and
# B300 (10.3) of vaed's users.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "9.0;10.3")
endif()
# The wheel's TorchConfig.cmake stops with Caffe2's own words when it finds
# no CUDA toolkit; say it in vaed's first.
find_package(CUDAToolkit QUIET)
if(NOT CUDAToolkit_FOUND)
  message(FATAL_ERROR
    "Configuring vaed needs the CUDA 13.0 toolkit (nvcc, headers, libraries; e.g. "
    "/usr/local/cuda), the CPU build too: LibTorch 2.11's CMake package (PyPI's CUDA 13.0 "
    "wheel) looks for it. The built CPU daemon does not need it at run time.")
endif()
# A build folder configured before keeps the Torch_DIR it found; a changed
# VAED_LIBTORCH_PREFIX must find torch again, or the build would mix two.
string(FIND "${Torch_DIR}" "${VAED_LIBTORCH_PREFIX}/" _vaed_torch_dir_at)
if(DEFINED CACHE{Torch_DIR} AND NOT _vaed_torch_dir_at EQUAL 0)
  unset(Torch_DIR CACHE)
  unset(Caffe2_DIR CACHE)
endif()
find_package(Torch 2.11 QUIET)
if(NOT Torch_FOUND)
  message(FATAL_ERROR
    "No LibTorch under VAED_LIBTORCH_PREFIX=${VAED_LIBTORCH_PREFIX} (no "
    "torch/share/cmake/Torch/TorchConfig.cmake). vaed builds against PyPI's torch==2.11.0: "
    "run scripts/fetch-libtorch.sh (scripts/install-deps.sh does), or point "
    "VAED_LIBTORCH_PREFIX at a site-packages that holds torch 2.11.")
elseif(NOT Torch_VERSION VERSION_EQUAL 2.11.0)
  message(FATAL_ERROR
    "vaed builds against LibTorch 2.11.0 (PyPI's torch==2.11.0); VAED_LIBTORCH_PREFIX="
    "${VAED_LIBTORCH_PREFIX} holds ${Torch_VERSION}. Run scripts/fetch-libtorch.sh, or point "
    "VAED_LIBTORCH_PREFIX at a site-packages that holds torch 2.11.")
endif()

# The wheel links MKL into libtorch_cpu.so statically; TorchConfig's
# caffe2::mkl (a usage requirement of torch_cpu) still names MKL's folders
# under an MKL_ROOT this machine does not have (/lib/intel64, ...), which
# would end up in every program's RUNPATH.
set_target_properties(caffe2::mkl PROPERTIES INTERFACE_LINK_DIRECTORIES ""
                      INTERFACE_INCLUDE_DIRECTORIES "")

# The include view without the bundled fmt and protobuf.
set(_vaed_torch_include "${CMAKE_BINARY_DIR}/libtorch-include")
file(REMOVE_RECURSE "${_vaed_torch_include}")
file(MAKE_DIRECTORY "${_vaed_torch_include}")
file(GLOB _vaed_torch_entries RELATIVE "${TORCH_INSTALL_PREFIX}/include"
     "${TORCH_INSTALL_PREFIX}/include/*")
foreach(entry IN LISTS _vaed_torch_entries)
  if(NOT entry MATCHES "^(fmt|google)$")
    file(CREATE_LINK "${TORCH_INSTALL_PREFIX}/include/${entry}" "${_vaed_torch_include}/${entry}"
         SYMBOLIC)
  endif()
endforeach()

add_library(vaed_torch INTERFACE)
target_include_directories(vaed_torch SYSTEM INTERFACE
  "${_vaed_torch_include}" "${_vaed_torch_include}/torch/csrc/api/include")
target_compile_definitions(vaed_torch INTERFACE
  $<TARGET_PROPERTY:torch_cpu,INTERFACE_COMPILE_DEFINITIONS>)
# The libraries without their usage requirements (their include folder is
# the one the view replaces).
target_link_libraries(vaed_torch INTERFACE $<LINK_ONLY:torch_cpu> $<LINK_ONLY:c10>)
set(VAED_TORCH_CUDA_LIBS torch_cuda_library)

# The check: with vaed_torch's include folders first, as on every compile
# line, fmt and protobuf resolve to Debian's (cmake/torch_headers_check.cc;
# tests/cmake/torch_headers_test.sh shows the same source fails with the
# wheel's own include folder). Run on every configure: the prefix may change.
include(CheckCXXSourceCompiles)
unset(VAED_TORCH_HEADERS_LEAVE_DEBIANS CACHE)
file(READ "${CMAKE_CURRENT_LIST_DIR}/torch_headers_check.cc" _vaed_torch_headers_check)
set(CMAKE_REQUIRED_INCLUDES "${_vaed_torch_include}" "${_vaed_torch_include}/torch/csrc/api/include")
set(CMAKE_REQUIRED_QUIET ON)
check_cxx_source_compiles("${_vaed_torch_headers_check}" VAED_TORCH_HEADERS_LEAVE_DEBIANS)
unset(CMAKE_REQUIRED_INCLUDES)
unset(CMAKE_REQUIRED_QUIET)
if(NOT VAED_TORCH_HEADERS_LEAVE_DEBIANS)
  message(FATAL_ERROR
    "With LibTorch's include folders (${_vaed_torch_include}) first, <fmt/core.h> or "
    "<google/protobuf/stubs/common.h> is not Debian's (libfmt-dev 9, libprotobuf-dev 3.21): "
    "spdlog and vaed.pb.h would break. Is libfmt-dev / libprotobuf-dev installed?")
endif()
message(STATUS "LibTorch ${Torch_VERSION} from ${TORCH_INSTALL_PREFIX} (include view ${_vaed_torch_include})")
