# Debian packages of vaed, made by CPack from a built tree:
#   cpack -G DEB -B OUT_DIR        (run in the build directory)
# One install component (the COMPONENT of the install() rules) per package:
#   vaed                the daemon (sbin/vaed), vaed.service (enabled, not
#                       started, on install), its sysusers.d and tmpfiles.d
#                       snippets, the example /etc/vaed/vaed.toml (a conffile),
#                       and its private LibTorch 2.11 runtime in lib/vaed
#                       (cmake/libtorch_runtime.cmake): no Debian package
#                       provides torch 2.11
#   vaectl              the operator tool
#   libvaed-client0     (component client) libvaed_client.so.0
#   libvaed-client-dev  (component client_dev) the headers, libvaed_client.so,
#                       the CMake package vaed and vaed-client.pc
# (daemon/ and ops/ name no component: the top CMakeLists.txt gives theirs.)
# A client-only build (VAED_CLIENT_ONLY) makes the last two. Depends come
# from the binaries' shared libraries (dpkg-shlibdeps) plus the relations
# set here. tests/install/debian_packages_test.sh checks the packages.
#
# Everything is installed under /usr; the config under /etc (the install
# scripts in client/ and systemd/ write the paths of the prefix they are
# installed to, so the same rules serve cmake --install --prefix).

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME vaed)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(VAED_PACKAGE_MAINTAINER "vaed maintainers <vaed@localhost>"
    CACHE STRING "Maintainer field of the Debian packages (cpack -G DEB)")
set(CPACK_PACKAGE_CONTACT "${VAED_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <package>_<version>_<arch>.deb
# Packages ship stripped binaries: the RelWithDebInfo daemon is ~200 MB
# with its debug information, ~3 MB without.
set(CPACK_STRIP_FILES ON)
# Files and directories get the modes Debian expects (maintainer scripts
# 0755, conffiles 0644), whatever the umask of the build.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Each package's Description is its component's: the first line is the
# synopsis (CPACK_PACKAGE_DESCRIPTION_SUMMARY stays unset: CPack would put
# it in front of every package's).

if(VAED_CLIENT_ONLY)
  set(CPACK_COMPONENTS_ALL client client_dev)
else()
  set(CPACK_COMPONENTS_ALL vaed vaectl client client_dev)
endif()

# Depends from the shared libraries each package's binaries need.
# libvaed_client.so.0 is in no installed package when vaectl is packaged:
# dpkg-shlibdeps finds it in the build tree (-l) and, for want of package
# information, leaves it to the explicit relation below.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
get_target_property(VAED_CLIENT_LIBRARY_DIR vaed_client LIBRARY_OUTPUT_DIRECTORY)
if(NOT VAED_CLIENT_LIBRARY_DIR)
  get_target_property(VAED_CLIENT_LIBRARY_DIR vaed_client BINARY_DIR)
endif()
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${VAED_CLIENT_LIBRARY_DIR})
# The same for the LibTorch runtime the vaed package carries (libtorch_cpu.so,
# libc10.so, libgomp.so.1, libcudart.so.13, libcupti.so.13): dpkg-shlibdeps
# finds them where they were copied from, the wheel's folders, before any
# system folder, so no Debian package (libgomp1, libtorch) is taken for
# them; they are in the package itself and need no relation. (A private
# folder also makes CPack pass --ignore-missing-info.)
if(NOT VAED_CLIENT_ONLY)
  list(APPEND CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
       "${TORCH_INSTALL_PREFIX}/lib" "${VAED_LIBTORCH_PREFIX}/nvidia/cu13/lib")
endif()
# A component's DEPENDS (CPACK_COMPONENT_<C>_DEPENDS) becomes
# "Depends: <its package> (= version)".
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

set(CPACK_DEBIAN_CLIENT_PACKAGE_NAME libvaed-client0)
set(CPACK_DEBIAN_CLIENT_PACKAGE_SECTION libs)
set(CPACK_COMPONENT_CLIENT_DESCRIPTION "client library of the vaed VAE decode daemon
libvaed_client.so.0, the C++ API and C ABI with which DiT workers hand
latents to vaed and get frames back in POSIX shared memory.")
# A shlibs file, so that packages built against libvaed_client depend on
# this package. Written here, not by CPack (CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS):
# CPack would write one into every package holding a shared object, and so
# announce the vaed package's private LibTorch libraries (libgomp.so.1,
# libcudart.so.13, ...) as public libraries of the system.
get_target_property(VAED_CLIENT_SOVERSION vaed_client SOVERSION)
file(WRITE ${PROJECT_BINARY_DIR}/packaging/client/shlibs
     "libvaed_client ${VAED_CLIENT_SOVERSION} libvaed-client0 (>= ${PROJECT_VERSION})\n")
set(CPACK_DEBIAN_CLIENT_PACKAGE_CONTROL_EXTRA ${PROJECT_BINARY_DIR}/packaging/client/shlibs)

set(CPACK_DEBIAN_CLIENT_DEV_PACKAGE_NAME libvaed-client-dev)
set(CPACK_DEBIAN_CLIENT_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_CLIENT_DEV_DESCRIPTION "client library of vaed: development files
The headers, libvaed_client.so, the CMake package vaed (vaed::client),
vaed-client.pc for pkg-config and the protocol vaed.v1 (vaed.proto).")
set(CPACK_COMPONENT_CLIENT_DEV_DEPENDS client)
if(NOT VAED_CLIENT_ONLY)
  set(CPACK_DEBIAN_VAECTL_PACKAGE_NAME vaectl)
  set(CPACK_DEBIAN_VAECTL_PACKAGE_SECTION utils)
  set(CPACK_COMPONENT_VAECTL_DESCRIPTION "operator tool of the vaed VAE decode daemon
vaectl shows a running vaed's status and live view, lifts quarantines,
plans decodes and decodes latent files through it.")
  set(CPACK_COMPONENT_VAECTL_DEPENDS client)

  set(CPACK_DEBIAN_VAED_PACKAGE_NAME vaed)
  set(CPACK_DEBIAN_VAED_PACKAGE_SECTION misc)
  set(CPACK_COMPONENT_VAED_DESCRIPTION "VAE decode sidecar for DiT workers
vaed keeps VAE decoders (MiniMax-H3 video and audio, TAEF2) warm and
decodes the latents that DiT workers on the node hand it in shared memory.
It carries its own LibTorch 2.11 runtime (CPU) in a private folder, so the
host needs no torch, no CUDA toolkit and no GPU.
vaed.service is installed enabled but not started.")
  # The postinst runs systemd-sysusers, from systemd or a standalone package.
  set(CPACK_DEBIAN_VAED_PACKAGE_DEPENDS "systemd | systemd-sysusers")
  # dpkg keeps an operator's edits of a conffile across upgrades and removes
  # it on purge. The path is where systemd/install_service.cmake.in puts the
  # config for the prefix /usr.
  file(WRITE ${PROJECT_BINARY_DIR}/packaging/vaed/conffiles "/etc/vaed/vaed.toml\n")
  set(CPACK_DEBIAN_VAED_PACKAGE_CONTROL_EXTRA
      ${PROJECT_BINARY_DIR}/packaging/vaed/conffiles
      ${PROJECT_SOURCE_DIR}/packaging/debian/vaed/postinst
      ${PROJECT_SOURCE_DIR}/packaging/debian/vaed/prerm
      ${PROJECT_SOURCE_DIR}/packaging/debian/vaed/postrm)
endif()

include(CPack)
