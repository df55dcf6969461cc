# Sourced by scripts/test.sh, sanitize.sh and fuzz.sh: compiles go through
# ccache (when installed; CMake's VAED_CCACHE picks it up) with a cache that
# checkouts in other folders share:
#   CCACHE_BASEDIR   this checkout: paths inside it are hashed relative to
#                    the build directory, so /a/vaed and /b/vaed hit alike;
#   CCACHE_NOHASHDIR the build directory's absolute path is not hashed
#                    (debug info then names the first checkout's folder);
#   CCACHE_MAXSIZE   room for the three builds (main, sanitizer, fuzz).
# The cache itself is ccache's default (~/.cache/ccache), or CCACHE_DIR.
# Nothing here is needed for a correct build; without ccache it is slower.
_vaed_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$_vaed_root}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-20G}"
unset _vaed_root
