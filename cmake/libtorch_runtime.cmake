# The LibTorch runtime that the installed daemon loads, installed with it
# (component vaed: the vaed package, and cmake --install). No Debian package
# provides torch 2.11, so the libraries are copied from the wheel's
# site-packages (VAED_LIBTORCH_PREFIX, cmake/libtorch.cmake) into a folder
# of vaed's own, <libdir>/vaed (/usr/lib/vaed in the package), where no
# other program looks for libraries. The installed vaed finds them through
# its RPATH ($ORIGIN/../lib/vaed), never in the venv under /opt/vaed nor in
# a CUDA toolkit, so a host needs neither torch nor CUDA nor a GPU.
#
# The set is what the CPU daemon loads (readelf -d), and nothing more:
#   libtorch_cpu.so, libc10.so       vaed links them (vaed_torch);
#   libgomp.so.1                     libtorch_cpu.so's OpenMP runtime: the
#                                    wheel's own, the one LibTorch was built
#                                    and tested with (Debian's libgomp1 is
#                                    another GCC's);
#   libcudart.so.13, libcupti.so.13  libtorch_cpu.so of the CUDA 13.0 wheel
#                                    NEEDs them even when it never touches a
#                                    GPU; they load without a driver. They
#                                    come from the nvidia-cuda-runtime and
#                                    nvidia-cuda-cupti wheels, in the
#                                    site-packages' nvidia/cu13/lib.
# libtorch_cuda.so and the rest of the wheel stay out: the CPU daemon never
# loads them. (A GPU build's daemon, VAED_WITH_CUDA, links libtorch_cuda
# too; its installed copy would need that CUDA side as well, which is not
# installed here.)
#
# Installed, the wheel's libraries get the RPATH $ORIGIN in place of the
# wheel's ($ORIGIN/../../nvidia/*/lib:...:$ORIGIN), so they find each other
# in the private folder and never whatever ../../nvidia is on the host; and
# they are stripped when the install strips (cpack's CPACK_STRIP_FILES,
# cmake --install --strip), as the daemon is: install(FILES) alone would
# not, and libtorch_cpu.so carries 93 MB of symbol tables.
#
# Included after daemon/, whose target vaed gets its install RPATH here.
# tests/install/debian_packages_test.sh and fresh_debian_decode_test.sh
# check the result.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  message(FATAL_ERROR "CMAKE_INSTALL_LIBDIR must be relative to the prefix (the daemon's "
                      "RPATH names its LibTorch folder relative to sbin): ${CMAKE_INSTALL_LIBDIR}")
endif()
set(VAED_LIBTORCH_RUNTIME_DIR "${CMAKE_INSTALL_LIBDIR}/vaed")

set(_vaed_runtime_files
    "${TORCH_INSTALL_PREFIX}/lib/libtorch_cpu.so"
    "${TORCH_INSTALL_PREFIX}/lib/libc10.so"
    "${TORCH_INSTALL_PREFIX}/lib/libgomp.so.1"
    "${VAED_LIBTORCH_PREFIX}/nvidia/cu13/lib/libcudart.so.13"
    "${VAED_LIBTORCH_PREFIX}/nvidia/cu13/lib/libcupti.so.13")
set(_vaed_runtime_names)
foreach(file IN LISTS _vaed_runtime_files)
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR
      "The installed daemon needs ${file}, which is missing: the LibTorch runtime it "
      "carries (libtorch_cpu.so, libc10.so, libgomp.so.1 of torch 2.11, libcudart.so.13 and "
      "libcupti.so.13 beside it) comes from VAED_LIBTORCH_PREFIX=${VAED_LIBTORCH_PREFIX}. "
      "Run scripts/fetch-libtorch.sh.")
  endif()
  get_filename_component(name "${file}" NAME)
  list(APPEND _vaed_runtime_names "${name}")
endforeach()
install(FILES ${_vaed_runtime_files} DESTINATION "${VAED_LIBTORCH_RUNTIME_DIR}" COMPONENT vaed)

# After the copy: RPATH $ORIGIN on those that have one (libcudart and
# libcupti have none, and file(RPATH_SET) cannot add one), then the strip.
string(CONFIGURE [[
foreach(name IN ITEMS @_vaed_runtime_names@)
  set(lib "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/@VAED_LIBTORCH_RUNTIME_DIR@/${name}")
  unset(rpath)  # READ_ELF leaves it as it was when the file has no RPATH
  file(READ_ELF "${lib}" RPATH rpath)
  if(rpath)
    file(RPATH_SET FILE "${lib}" NEW_RPATH [=[$ORIGIN]=])
  endif()
  if(CMAKE_INSTALL_DO_STRIP)
    execute_process(COMMAND "@CMAKE_STRIP@" "${lib}" RESULT_VARIABLE failed)
    if(failed)
      message(FATAL_ERROR "@CMAKE_STRIP@ ${lib} failed")
    endif()
  endif()
endforeach()
]] _vaed_runtime_fixup @ONLY)
install(CODE "${_vaed_runtime_fixup}" COMPONENT vaed)

# The installed daemon looks for them there: sbin/../lib/vaed (or
# ../lib/x86_64-linux-gnu/vaed for a build configured for the prefix /usr).
file(RELATIVE_PATH _vaed_sbin_to_runtime "${CMAKE_INSTALL_FULL_SBINDIR}"
     "${CMAKE_INSTALL_PREFIX}/${VAED_LIBTORCH_RUNTIME_DIR}")
set_target_properties(vaed PROPERTIES INSTALL_RPATH "$ORIGIN/${_vaed_sbin_to_runtime}")
