#!/usr/bin/env bash
# Checks the shipped systemd snippets in systemd/ with systemd's own tools.
#
#   check_units.sh service  SYSTEMD_DIR VAED_BINARY
#     Runs `systemd-analyze verify` on a copy of vaed.service whose ExecStart
#     points at the built daemon (verify insists that the binary exists; the
#     shipped unit keeps /usr/local/sbin/vaed). Fails on any output line that
#     mentions vaed.service, and on shipped settings that would break clients
#     (PrivateDevices=/PrivateIPC= hide their /dev/shm segments).
#
#   check_units.sh sysusers-tmpfiles SYSTEMD_DIR
#     Applies vaed.sysusers and then vaed.tmpfiles to an empty alternate root
#     and checks the users, directories, modes and owners they create.
#
#   check_units.sh config SYSTEMD_DIR VAED_BINARY
#     The example vaed.toml is accepted by the built daemon
#     (`vaed --config vaed.toml --print-config`), and every key the daemon
#     knows (its --print-config of the embedded defaults) is set in it.
#
# Exit status: 0 pass, 1 fail, 77 skipped (tool missing, or not root where
# chown is needed); ctest maps 77 to "skipped".
set -u

fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
skip() { printf 'SKIP: %s\n' "$*" >&2; exit 77; }

mode=${1:?usage: check_units.sh service|sysusers-tmpfiles|config SYSTEMD_DIR [VAED_BINARY]}
dir=${2:?missing SYSTEMD_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vaed-units.XXXXXX") || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT

check_service() {
  local bin=${1:?missing VAED_BINARY}
  local unit="$dir/vaed.service"
  command -v systemd-analyze >/dev/null || skip "systemd-analyze not installed"
  [ -f "$unit" ] || fail "$unit is missing"
  [ -x "$bin" ] || fail "built daemon $bin is missing or not executable (build target vaed first)"

  grep -qx 'ExecStart=/usr/local/sbin/vaed --config /etc/vaed/vaed.toml' "$unit" ||
    fail "shipped ExecStart must be '/usr/local/sbin/vaed --config /etc/vaed/vaed.toml'"
  local key
  for key in PrivateDevices PrivateIPC; do
    if grep -Eq "^[[:space:]]*${key}=" "$unit"; then
      fail "$key= must not be set: clients' /dev/shm segments must stay visible to vaed"
    fi
  done
  for key in Type=notify NotifyAccess=main WatchdogSec=30 User=vaed Group=vaed \
             RuntimeDirectory=vaed RuntimeDirectoryMode=0750; do
    grep -qx "$key" "$unit" || fail "expected line '$key' in $unit"
  done

  # Same file name, so that verify's messages name vaed.service.
  sed "s#^ExecStart=/usr/local/sbin/vaed #ExecStart=$bin #" "$unit" > "$tmp/vaed.service"
  grep -q "^ExecStart=$bin " "$tmp/vaed.service" || fail "could not rewrite ExecStart"

  local out rc
  out=$(cd "$tmp" && systemd-analyze verify "$tmp/vaed.service" 2>&1)
  rc=$?
  printf '%s\n' "$out"
  if printf '%s\n' "$out" | grep -q 'vaed\.service'; then
    fail "systemd-analyze verify reported problems in vaed.service (lines above)"
  fi
  [ "$rc" -eq 0 ] || fail "systemd-analyze verify exited with $rc"
  echo "PASS: systemd-analyze verify vaed.service (ExecStart -> $bin)"
}

check_sysusers_tmpfiles() {
  command -v systemd-sysusers >/dev/null || skip "systemd-sysusers not installed"
  command -v systemd-tmpfiles >/dev/null || skip "systemd-tmpfiles not installed"
  local root="$tmp/root" out
  mkdir -p "$root/etc"

  # Parse check that needs no privileges.
  out=$(systemd-sysusers --dry-run --root="$root" "$dir/vaed.sysusers" 2>&1) ||
    { printf '%s\n' "$out"; fail "systemd-sysusers --dry-run rejected vaed.sysusers"; }
  printf '%s\n' "$out"
  printf '%s\n' "$out" | grep -q "Creating user 'vaed'" || fail "vaed.sysusers does not create user vaed"
  printf '%s\n' "$out" | grep -q "Creating group 'vaed'" || fail "vaed.sysusers does not create group vaed"

  # systemd 252's systemd-tmpfiles has no --dry-run; applying the snippet
  # chowns, which needs root.
  [ "$(id -u)" -eq 0 ] || skip "vaed.sysusers parses; applying vaed.tmpfiles needs root (systemd 252 has no tmpfiles --dry-run)"

  out=$(systemd-sysusers --root="$root" "$dir/vaed.sysusers" 2>&1) ||
    { printf '%s\n' "$out"; fail "systemd-sysusers failed to apply vaed.sysusers"; }
  local uid gid
  uid=$(awk -F: '$1=="vaed"{print $3}' "$root/etc/passwd")
  gid=$(awk -F: '$1=="vaed"{print $3}' "$root/etc/group")
  [ -n "$uid" ] && [ -n "$gid" ] || fail "user/group vaed missing from the alternate root"

  out=$(systemd-tmpfiles --root="$root" --create "$dir/vaed.tmpfiles" 2>&1)
  local rc=$?
  printf '%s\n' "$out"
  [ "$rc" -eq 0 ] && [ -z "$out" ] || fail "systemd-tmpfiles --create vaed.tmpfiles: exit $rc"

  local want path got
  for want in "/run/vaed 750 $uid $gid" "/var/cache/vaed 750 $uid $gid" "/var/lib/vaed 750 0 $gid"; do
    path=${want%% *}
    got=$(stat -c "$path %a %u %g" "$root$path" 2>/dev/null) || fail "$path was not created"
    [ "$got" = "$want" ] || fail "expected '$want', got '$got'"
  done
  echo "PASS: vaed.sysusers and vaed.tmpfiles apply cleanly (uid $uid, gid $gid)"
}

check_config() {
  local bin=${1:?missing VAED_BINARY}
  local example="$dir/vaed.toml" out key missing=""
  [ -x "$bin" ] || fail "built daemon $bin is missing or not executable (build target vaed first)"
  out=$("$bin" --config "$example" --print-config 2>&1) ||
    { printf '%s\n' "$out"; fail "vaed rejected $example"; }
  out=$("$bin" --print-config 2>&1) || { printf '%s\n' "$out"; fail "vaed --print-config failed"; }
  for key in $(printf '%s\n' "$out" | sed -n 's/^[[:space:]]*\([A-Za-z_][A-Za-z0-9_]*\)[[:space:]]*=.*/\1/p' | sort -u); do
    grep -Eq "^[[:space:]]*${key}[[:space:]]*=" "$example" || missing="$missing $key"
  done
  [ -z "$missing" ] || fail "keys of vaed --print-config not set in $example:$missing"
  echo "PASS: $example parses and sets every key the daemon prints"
}

# Regression: the shipped vaed.toml did not start
# (/var/lib/vaed/taef2_decoder.safetensors not found). As shipped it must
# start: the daemon, given the example config and a scratch socket, serves
# (vaectl status answers) with the demo model as its default.
check_starts() {
  local bin=${1:?missing VAED_BINARY} vaectl=${2:?missing VAECTL_BINARY}
  local example="$dir/vaed.toml" tmp pid status
  tmp=$(mktemp -d /tmp/vaed-shipped-XXXXXX)
  "$bin" --config "$example" --socket "$tmp/vaed.sock" > "$tmp/log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    [ -S "$tmp/vaed.sock" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if ! status=$("$vaectl" --socket "$tmp/vaed.sock" status --json 2>&1); then
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    cat "$tmp/log"; rm -rf "$tmp"
    fail "vaed did not start with $example as shipped: $status"
  fi
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$tmp"
  grep -q '"default_model": "demo"' <<< "$status" || fail "default model is not demo: $status"
  echo "PASS: vaed starts and serves with $example as shipped"
}

case "$mode" in
  service) check_service "${3:-}" ;;
  sysusers-tmpfiles) check_sysusers_tmpfiles ;;
  config) check_config "${3:-}" ;;
  starts) check_starts "${3:-}" "${4:-}" ;;
  *) fail "unknown mode '$mode'" ;;
esac
