#!/usr/bin/env bash
# Prints what the device call of docs/gpu.md ("The device check") would
# send to the GPU machine, and whether it fits: the working tree as the
# device tool copies it (tracked files and untracked files git does not
# ignore) and each git-ignored folder it carries, with their total against
# the tool's limit of 64 MiB for all of it.
#
#   .gpu-debs/    Debian packages the GPU image lacks (fetch-debs.sh)
#   .gpu-golden/  the golden H3 data the GPU steps read (fetch-debs.sh)
#   .gpu-bin/     the GPU build's programs, prebuilt here (pack-binaries.sh)
#
# A carried folder that does not exist is listed as absent (it sends
# nothing). The margin kept below the limit (4 MiB) leaves room for the
# checkout to grow between the measurement and the call.
#
# Usage: scripts/gpu/carry_size.sh [--quiet]
#   --quiet  print only the one total line
# Exit status: 0 within the limit less the margin, 1 over it (the figures
# say by how much), 2 usage.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# The carry list of the device call, in the order docs/gpu.md gives it.
carried=(.gpu-debs .gpu-golden .gpu-bin)
limit=$((64 * 1048576))
margin=$((4 * 1048576))
quiet=0
case "${1:-}" in
  "") ;;
  --quiet) quiet=1 ;;
  *) echo "usage: scripts/gpu/carry_size.sh [--quiet]" >&2; exit 2 ;;
esac

mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }

tree=$(cd "$root" && git ls-files -z --cached --others --exclude-standard |
       xargs -0 -r stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
total=$tree
[ $quiet = 1 ] || echo "carry: working tree (tracked + untracked not ignored): $(mib "$tree")"
for folder in "${carried[@]}"; do
  if [ -d "$root/$folder" ]; then
    bytes=$(du -sb "$root/$folder" | cut -f1)
    total=$((total + bytes))
    [ $quiet = 1 ] || echo "carry: $folder: $(mib "$bytes") ($(find "$root/$folder" -type f | wc -l) files)"
  else
    [ $quiet = 1 ] || echo "carry: $folder: absent"
  fi
done
echo "carry: total $(mib "$total") of the 64 MiB limit ($(mib $((limit - total))) left, of which the 4 MiB margin is to stay free)"
if [ "$total" -gt $((limit - margin)) ]; then
  echo "carry: over the limit less the 4 MiB margin by $(mib $((total - limit + margin)))" >&2
  exit 1
fi
