#!/usr/bin/env bash
# For deployers: the Debian packages that cpack makes from the build
# tree (cmake/packaging.cmake) hold what they should and work unpacked.
#   1. cpack -G DEB into a scratch directory: vaed, vaectl, libvaed-client0,
#      libvaed-client-dev.
#   2. dpkg-deb -I / -c of each: the files, Depends (from dpkg-shlibdeps
#      plus the packages' own relations), no file in two packages; vaed's
#      conffiles (/etc/vaed/vaed.toml) and maintainer scripts, which never
#      start or restart the daemon. vaed carries its LibTorch 2.11 runtime
#      (cmake/libtorch_runtime.cmake) in <libdir>/vaed: exactly
#      libtorch_cpu.so, libc10.so, libgomp.so.1, libcudart.so.13 and
#      libcupti.so.13, stripped, and depends on no libtorch, BLAS, libgomp1
#      or CUDA package.
#   3. dpkg -x of all four into a scratch root: systemd-analyze verify of
#      the unit as installed, run with --root (its ExecStart must name the
#      unpacked daemon); the unpacked vaed resolves every library in the
#      root (its LibTorch in <libdir>/vaed) or the base system, none under
#      /opt/vaed or /usr/local/cuda (ldd, without LD_LIBRARY_PATH); the
#      unpacked vaectl --help and vaed --help with libvaed_client from the
#      root only.
#   4. As root: vaed's maintainer scripts run against that root as dpkg
#      would (DPKG_ROOT) for install, remove, reinstall, upgrade and purge:
#      the user vaed, /var/lib/vaed, vaed.service enabled, masked on removal,
#      left disabled by an upgrade once the operator disabled it, forgotten
#      on purge.
# Nothing is installed on this machine and no daemon is started
# (fresh_debian_decode_test.sh installs the packages in a fresh Debian 12
# root and decodes).
#
# Usage: debian_packages_test.sh BUILD_DIR   (after the build; exit 77 =
# skipped: a Debian tool is missing)
set -euo pipefail
build=${1:?usage: debian_packages_test.sh BUILD_DIR}
fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in cpack dpkg-deb dpkg dpkg-shlibdeps file systemd-analyze readelf ldd; do
  command -v "$tool" > /dev/null || { echo "SKIP: $tool is not installed" >&2; exit 77; }
done
[[ -f $build/CPackConfig.cmake ]] || fail "$build/CPackConfig.cmake is missing (configure the full tree)"

cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
version=$(cache_value CMAKE_PROJECT_VERSION)
libdir=usr/$(cache_value CMAKE_INSTALL_LIBDIR)
[[ -n $version && $libdir != usr/ ]] || fail "no project version or CMAKE_INSTALL_LIBDIR in $build/CMakeCache.txt"

scratch=$(mktemp -d /tmp/vaed-debs-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
root=$scratch/root

# --- 1. the packages -------------------------------------------------------
if ! (cd "$build" && cpack -G DEB -B "$scratch/out") > "$scratch/cpack.log" 2>&1; then
  cat "$scratch/cpack.log" >&2
  fail "cpack -G DEB failed"
fi
arch=$(dpkg --print-architecture)
deb() { echo "$scratch/out/$1_${version}_$arch.deb"; }
for package in vaed vaectl libvaed-client0 libvaed-client-dev; do
  [[ -f $(deb "$package") ]] || { ls "$scratch/out" >&2; fail "cpack made no $(basename "$(deb "$package")")"; }
done

# --- 2. control fields and contents ----------------------------------------
field() { dpkg-deb -f "$(deb "$1")" "$2"; }
# expect_depends PACKAGE REGEX...: each regex matches one relation of Depends.
expect_depends() {
  local package=$1 depends want
  shift
  depends=$(field "$package" Depends)
  [[ -n $depends ]] || fail "$package has no Depends"
  for want in "$@"; do
    tr ',' '\n' <<< "$depends" | sed 's/^ *//' | grep -qE "^($want)\$" ||
      fail "$package: Depends '$depends' lacks a relation matching '$want'"
  done
  echo "$package: Depends: $depends"
}
libc='libc6 \(>= [0-9.]+\)'
expect_depends vaed "$libc" 'libsystemd0( \(>= [^)]+\))?' 'systemd \| systemd-sysusers'
expect_depends vaectl "$libc" "libvaed-client0 \(= $version\)"
expect_depends libvaed-client0 "$libc" 'libzmq5( \(>= [^)]+\))?' 'libprotobuf[0-9]+( \(>= [^)]+\))?' \
               'libacl1( \(>= [^)]+\))?'
expect_depends libvaed-client-dev "libvaed-client0 \(= $version\)"
# The development files need no protobuf: the installed headers include none.
[[ $(field libvaed-client-dev Depends) != *libprotobuf-dev* ]] ||
  fail "libvaed-client-dev depends on libprotobuf-dev"
# vaed does not link the client library, and its LibTorch, OpenMP and CUDA
# runtime libraries are its own (3 below), not Debian's or NVIDIA's.
[[ $(field vaed Depends) != *libvaed-client0* ]] || fail "vaed depends on libvaed-client0"
foreign=$(field vaed Depends | tr ',' '\n' | sed 's/^ *//' |
            grep -E '^(libtorch|libopenblas|libblas|liblapack|libgomp|libcuda|libcudart|libcupti|nvidia)' || true)
[[ -z $foreign ]] || fail "vaed depends on packages whose libraries it carries: $foreign"
for package in vaed vaectl libvaed-client0 libvaed-client-dev; do
  [[ $(field "$package" Version) == "$version" ]] || fail "$package has version $(field "$package" Version), not $version"
done

# expect_files PACKAGE PATH...: each PATH (relative to /) is in PACKAGE,
# as a file or a link.
expect_files() {
  local package=$1 path
  shift
  for path in "$@"; do
    grep -qxF "./$path" "$scratch/$package.files" || fail "$package lacks /$path"
  done
}
for package in vaed vaectl libvaed-client0 libvaed-client-dev; do
  dpkg-deb -c "$(deb "$package")" | awk '$1 !~ /^d/ {print $6}' > "$scratch/$package.files"
done
expect_files vaed usr/sbin/vaed usr/lib/systemd/system/vaed.service usr/lib/sysusers.d/vaed.conf \
             usr/lib/tmpfiles.d/vaed.conf etc/vaed/vaed.toml
# The private LibTorch runtime: these five and nothing else of the wheel
# (no libtorch_cuda.so: the CPU daemon never loads it).
runtime=(libc10.so libcudart.so.13 libcupti.so.13 libgomp.so.1 libtorch_cpu.so)
in_runtime=$(grep "^\./$libdir/vaed/" "$scratch/vaed.files" | sed "s|^\./$libdir/vaed/||" | LC_ALL=C sort | tr '\n' ' ')
[[ $in_runtime == "${runtime[*]} " ]] ||
  fail "vaed's /$libdir/vaed holds '$in_runtime', not exactly '${runtime[*]}'"
expect_files vaectl usr/bin/vaectl
expect_files libvaed-client0 "$libdir/libvaed_client.so.0" "$libdir/libvaed_client.so.$version"
expect_files libvaed-client-dev "$libdir/libvaed_client.so" usr/include/vaed/client.h \
             usr/include/vaed/vaed_c.h usr/include/vaed/status.h usr/include/vaed/tensor_ref.h \
             usr/include/vaed/replies.h usr/share/vaed/proto/vaed/v1/vaed.proto \
             "$libdir/cmake/vaed/vaedConfig.cmake" "$libdir/cmake/vaed/vaedConfigVersion.cmake" \
             "$libdir/cmake/vaed/vaedTargets.cmake" "$libdir/pkgconfig/vaed-client.pc"
shared=$(sort "$scratch"/*.files | uniq -d)
[[ -z $shared ]] || fail "files in more than one package (dpkg refuses to install both): $shared"
# The run-time library package holds no development file and the reverse.
! grep -qE '\.so$|^\./usr/include/' "$scratch/libvaed-client0.files" ||
  fail "libvaed-client0 holds development files: $(cat "$scratch/libvaed-client0.files")"

dpkg-deb -e "$(deb vaed)" "$scratch/control"
[[ $(cat "$scratch/control/conffiles" 2> /dev/null) == "/etc/vaed/vaed.toml" ]] ||
  fail "vaed's conffiles is not exactly /etc/vaed/vaed.toml: $(cat "$scratch/control/conffiles" 2>&1)"
# Only the client library is announced to dpkg-shlibdeps; the private
# LibTorch libraries in vaed are nobody else's to link.
[[ ! -e $scratch/control/shlibs ]] || fail "vaed has a shlibs file: $(cat "$scratch/control/shlibs")"
dpkg-deb -e "$(deb libvaed-client0)" "$scratch/client-control"
[[ $(cat "$scratch/client-control/shlibs" 2> /dev/null) == "libvaed_client 0 libvaed-client0 (>= $version)" ]] ||
  fail "libvaed-client0's shlibs is not 'libvaed_client 0 libvaed-client0 (>= $version)': $(cat "$scratch/client-control/shlibs" 2>&1)"
for script in postinst prerm postrm; do
  [[ -x $scratch/control/$script ]] || fail "vaed has no executable $script"
  sh -n "$scratch/control/$script" || fail "vaed's $script is not valid sh"
  # Code, not comments, that would start the daemon.
  if sed 's/#.*//' "$scratch/control/$script" |
       grep -E '(systemctl|deb-systemd-invoke)' | grep -qE '\b(start|restart|try-restart|reload-or-restart)\b'; then
    fail "vaed's $script starts or restarts the daemon"
  fi
done
grep -q 'deb-systemd-helper enable vaed.service' "$scratch/control/postinst" ||
  fail "vaed's postinst does not enable vaed.service"

# --- 3. unpacked -----------------------------------------------------------
for package in vaed vaectl libvaed-client0 libvaed-client-dev; do
  dpkg -x "$(deb "$package")" "$root"
done
unit=$root/usr/lib/systemd/system/vaed.service
grep -qx 'ExecStart=/usr/sbin/vaed --config /etc/vaed/vaed.toml' "$unit" ||
  fail "the packaged unit does not start /usr/sbin/vaed with /etc/vaed/vaed.toml: $(grep ExecStart "$unit")"
cmp -s "$root/etc/vaed/vaed.toml" "$(dirname "$0")/../../systemd/vaed.toml" ||
  fail "the packaged /etc/vaed/vaed.toml differs from systemd/vaed.toml"

# systemd-analyze verify --root resolves ExecStart and the unit's
# dependencies in the root: the unpacked daemon, and the host's standard
# targets (copied, so that sysinit.target and the like exist there).
cp -n /usr/lib/systemd/system/*.target "$root/usr/lib/systemd/system/"
if ! out=$(cd "$scratch" && systemd-analyze verify --root="$root" /usr/lib/systemd/system/vaed.service 2>&1) ||
   grep -q 'vaed\.service' <<< "$out"; then
  echo "$out" >&2
  fail "systemd-analyze verify --root=$root vaed.service reported problems (above)"
fi
echo "systemd-analyze verify: the unpacked vaed.service is clean"

# The unpacked vaed finds its LibTorch in the root through its RPATH alone,
# everything else in the base system; nothing from the build machine's
# torch venv or CUDA toolkit.
for lib in "${runtime[@]}"; do
  file "$root/$libdir/vaed/$lib" | grep -q ', stripped' || fail "/$libdir/vaed/$lib is not stripped"
done
rpath=$(readelf -d "$root/$libdir/vaed/libtorch_cpu.so" | sed -n 's/.*(RPATH).*\[\(.*\)\]/\1/p')
[[ $rpath == '$ORIGIN' ]] || fail "the packaged libtorch_cpu.so has the RPATH '$rpath', not \$ORIGIN"
libs=$(env -i PATH=/usr/bin:/bin ldd "$root/usr/sbin/vaed")
declare -A resolved=()  # soname -> the file ldd resolved it to, without ../
while read -r name arrow path _; do
  [[ $arrow == '=>' ]] || continue
  [[ $path != not ]] || { echo "$libs" >&2; fail "the unpacked vaed does not find $name"; }
  resolved[$name]=$(realpath "$path")
done <<< "$libs"
for name in "${!resolved[@]}"; do
  case ${resolved[$name]} in
    "$root"/* | /lib/* | /lib64/* | /usr/lib/* | /usr/lib64/*) ;;
    *) echo "$libs" >&2; fail "the unpacked vaed loads $name from outside the root and the base system: ${resolved[$name]}" ;;
  esac
done
for lib in "${runtime[@]}"; do
  [[ ${resolved[$lib]:-} == "$root/$libdir/vaed/$lib" ]] ||
    fail "the unpacked vaed does not load $lib from the root's /$libdir/vaed: ${resolved[$lib]:-not at all}"
done
echo "unpacked vaed: LibTorch from $root/$libdir/vaed, the rest from the base system"

# The unpacked programs run, with libvaed_client from the root only.
run_unpacked() {
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$root/$libdir" "$@"
}
out=$(run_unpacked "$root/usr/bin/vaectl" --help 2>&1) || { echo "$out" >&2; fail "the unpacked vaectl --help failed"; }
grep -q vaectl <<< "$out" || fail "unexpected vaectl --help output: $out"
resolved=$(run_unpacked ldd "$root/usr/bin/vaectl" | grep libvaed_client || true)
[[ $resolved == *"$root/"* ]] || fail "the unpacked vaectl resolves libvaed_client as: $resolved"
out=$(run_unpacked "$root/usr/sbin/vaed" --help 2>&1) || { echo "$out" >&2; fail "the unpacked vaed --help failed"; }
echo "unpacked: vaectl --help and vaed --help run ($resolved)"

# --- 4. maintainer scripts in the root --------------------------------------
if [[ $(id -u) -ne 0 ]]; then
  echo "PASS (maintainer scripts not run: systemd-sysusers --root needs root)"
  exit 0
fi
command -v deb-systemd-helper > /dev/null || { echo "PASS (no deb-systemd-helper: maintainer scripts not run)"; exit 0; }
# maint SCRIPT ARGUMENT: runs vaed's SCRIPT in the environment dpkg gives
# it (deb-systemd-helper insists on DPKG_MAINTSCRIPT_PACKAGE).
maint() {
  DPKG_ROOT=$root DPKG_MAINTSCRIPT_PACKAGE=vaed DPKG_MAINTSCRIPT_NAME=$1 \
    sh "$scratch/control/$1" "$2" > "$scratch/maint.log" 2>&1 ||
    { cat "$scratch/maint.log" >&2; fail "vaed's $1 $2 failed"; }
}
wants=$root/etc/systemd/system/multi-user.target.wants/vaed.service
mask=$root/etc/systemd/system/vaed.service
maint postinst configure
grep -q '^vaed:' "$root/etc/passwd" || fail "postinst created no user vaed"
grep -q '^vaed:' "$root/etc/group" || fail "postinst created no group vaed"
[[ -d $root/var/lib/vaed ]] || fail "postinst created no /var/lib/vaed"
[[ $(readlink "$wants") == /usr/lib/systemd/system/vaed.service ]] ||
  fail "postinst did not enable vaed.service (multi-user.target.wants: $(readlink "$wants" || echo none))"
maint prerm remove
maint postrm remove
[[ $(readlink "$mask") == /dev/null ]] || fail "postrm remove did not mask vaed.service"
maint postinst configure
[[ ! -e $mask && -L $wants ]] || fail "a reinstall did not unmask and keep vaed.service enabled"
rm "$wants"  # the operator disables vaed; an upgrade keeps it so
maint postinst configure
[[ ! -L $wants ]] || fail "an upgrade enabled vaed.service again after the operator disabled it"
maint postrm purge
[[ ! -e $mask && ! -L $wants ]] || fail "postrm purge left vaed.service enabled or masked"
echo "maintainer scripts: install enables (never starts), remove masks, an upgrade keeps" \
     "the operator's disable, purge forgets"
echo "PASS: the four packages hold their files and relations, and work unpacked"
