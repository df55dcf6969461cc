# Precompiled LibTorch headers.
#
# Parsing <torch/torch.h> alone takes ~34 s of one core on the CI machine
# (2-core AMD EPYC, gcc 12, -O2 -g), and some 60 translation units include
# it: on a build without a compiler cache that was about half of the time.
# The header is compiled once per kind of target (~55 s, a ~780 MB .gch);
# every target that uses LibTorch reuses it through
# vaed_use_torch_pch(<target>), and a unit that compiled in 46 s then
# compiles in 12 s (engine/decode_run.cc, measured by hand).
#
# The reusing targets must be compiled with flags the header accepts (gcc:
# the same -std, -O, -g and macros the header reads): they all link torch
# and vaed_warnings like vaed_torch_pch. -Winvalid-pch (an error under
# VAED_WERROR) makes a precompiled header the compiler would ignore a build
# failure instead of a silent slow build. CMake already adds it to units
# using a precompiled header (CMAKE_PCH_WARN_INVALID, on by default), so the
# compile line shows it twice; vaed_use_torch_pch adds it anyway so that the
# rule holds whatever that CMake variable says.
#
# VAED_TORCH_PCH=OFF compiles each unit from the headers (e.g. to check that
# a file includes what it uses).
option(VAED_TORCH_PCH "Precompile <torch/torch.h> once for every target that uses LibTorch" ON)

# gcc refuses a header precompiled with -fPIC in a unit compiled with -fPIE
# (libraries vs executables under POSITION_INDEPENDENT_CODE), so there are
# two: vaed_torch_pch (-fPIC) and vaed_torch_pch_exe (-fPIE).
function(_vaed_add_torch_pch name)
  set(source "${CMAKE_BINARY_DIR}/${name}.cc")
  if(NOT EXISTS "${source}")
    file(WRITE "${source}" "// Holds a precompiled <torch/torch.h> (cmake/torch_pch.cmake).\n")
  endif()
  add_library(${name} OBJECT "${source}")
  target_link_libraries(${name} PRIVATE vaed_torch vaed_warnings)
  target_precompile_headers(${name} PRIVATE <torch/torch.h>)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # Without a timestamp in the .pch, ccache can hash and reuse it.
    target_compile_options(${name} PRIVATE "SHELL:-Xclang -fno-pch-timestamp")
  endif()
endfunction()

if(VAED_TORCH_PCH)
  _vaed_add_torch_pch(vaed_torch_pch)
  _vaed_add_torch_pch(vaed_torch_pch_exe)
  set_target_properties(vaed_torch_pch_exe PROPERTIES POSITION_INDEPENDENT_CODE OFF)
  target_compile_options(vaed_torch_pch_exe PRIVATE -fPIE)
endif()

# vaed_use_torch_pch(<target>): <target>'s units start from the precompiled
# <torch/torch.h> (nothing when VAED_TORCH_PCH is OFF).
#
# -Wno-array-bounds -Wno-stringop-overflow -Wno-stringop-overread
# -Wno-restrict: with a precompiled header gcc 12 reports its own
# libstdc++'s std::string copies (char_traits.h memcpy "out of the bounds
# [0, 32]", "writing 93 bytes into a region of size 16", "reading 94 bytes
# from a region of size 16") in units that compile without a warning from
# the plain headers: the system-header exemption does not reach code that
# comes from a precompiled header. The clang build (scripts/sanitize.sh) and VAED_TORCH_PCH=OFF keep
# these checks.
function(vaed_use_torch_pch target)
  if(NOT VAED_TORCH_PCH)
    return()
  endif()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    target_precompile_headers(${target} REUSE_FROM vaed_torch_pch_exe)
  else()
    target_precompile_headers(${target} REUSE_FROM vaed_torch_pch)
  endif()
  target_compile_options(${target} PRIVATE -Winvalid-pch)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-array-bounds -Wno-stringop-overflow
                           -Wno-stringop-overread -Wno-restrict)
  endif()
endfunction()
