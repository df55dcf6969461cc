# vaed_cuda_sources(<target> SOURCES <files...> [INCLUDES <dirs...>] [LIBS <libs...>])
#
# Adds GPU-build sources to <target> so that only they see the CUDA (and
# NCCL) headers: the include directories go on those source files, and the
# libraries are linked without their usage requirements ($<LINK_ONLY:...>).
# Every other source of <target> then compiles with exactly the flags of the
# CPU build, so the compiler cache serves a GPU build from the CPU build's
# objects (scripts/cuda-build.sh). Call it in the directory that creates
# <target> (source properties are per directory).
function(vaed_cuda_sources target)
  cmake_parse_arguments(ARG "" "" "SOURCES;INCLUDES;LIBS" ${ARGN})
  target_sources(${target} PRIVATE ${ARG_SOURCES})
  set_property(SOURCE ${ARG_SOURCES} APPEND PROPERTY INCLUDE_DIRECTORIES
               ${CUDAToolkit_INCLUDE_DIRS} ${ARG_INCLUDES})
  foreach(lib CUDA::cudart ${ARG_LIBS})
    target_link_libraries(${target} PRIVATE $<LINK_ONLY:${lib}>)
  endforeach()
endfunction()
