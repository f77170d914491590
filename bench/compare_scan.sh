#!/usr/bin/env bash
# `cumulus scan` of a large float32 .npy against dd copying the same file, in the same run, page
# cache warm. Both read every byte once and write every byte once; the scan also computes. The
# scan syncs its output before the rename that makes it visible (unless --no-sync), so dd is timed
# both without and with conv=fsync, and the scan with and without --no-sync.
#
#   bench/compare_scan.sh [CUMULUS] [GIB] [AXIS] [MEMORY] [ROUNDS]
#     CUMULUS  the cumulus executable (default build/cumulus)
#     GIB      the file's size in GiB (default 2)
#     AXIS     the axis of the [rows, 4096] array to scan (default 1: contiguous rows)
#     MEMORY   --memory of the scan (default 256M)
#     ROUNDS   times each command runs, in turn; the medians are reported (default 3)
# The files go to $TMPDIR (default /tmp) and are removed at the end.
set -euo pipefail

cumulus=${1:-build/cumulus}
gib=${2:-2}
axis=${3:-1}
memory=${4:-256M}
rounds=${5:-3}
dir=$(mktemp -d "${TMPDIR:-/tmp}/compare_scan.XXXXXX")
trap 'rm -rf "$dir"' EXIT

cols=4096
rows=$((gib * 1024 * 1024 * 1024 / 4 / cols))
/usr/bin/python3 - "$dir/in.npy" "$rows" "$cols" <<'EOF'
import sys
import numpy as np
path, rows, cols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, cols))
rng = np.random.default_rng(0)
step = max(1, (64 << 20) // (4 * cols))
for r in range(0, rows, step):
    out[r:r + step] = rng.standard_normal((min(step, rows - r), cols), dtype=np.float32)
out.flush()
EOF
bytes=$(stat -c %s "$dir/in.npy")
cat "$dir/in.npy" >/dev/null  # warm the page cache
sync  # the input's own writeback must not land inside a measurement

# Seconds taken by a command, its output discarded.
seconds() {
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  end=$(date +%s.%N)
  sync  # the previous output's writeback, outside the next measurement
  echo "$end - $start" | bc -l
}

report() {  # name seconds
  printf '%-28s %7.3f s  %7.0f MB/s\n' "$1" "$2" "$(echo "$bytes / $2 / 1000000" | bc -l)"
}

echo "file: $rows x $cols float32, $bytes bytes; scan axis $axis, --memory $memory; $rounds rounds"
# The three commands take turns, so drifting load or writeback touches each alike; medians.
dd_times=() dd_sync_times=() scan_times=() scan_nosync_times=()
for ((r = 0; r < rounds; r++)); do
  dd_times+=("$(seconds dd if="$dir/in.npy" of="$dir/dd.npy" bs=16M)")
  rm -f "$dir/dd.npy"
  dd_sync_times+=("$(seconds dd if="$dir/in.npy" of="$dir/dd.npy" bs=16M conv=fsync)")
  rm -f "$dir/dd.npy"
  scan_times+=("$(seconds "$cumulus" scan "$dir/in.npy" "$dir/out.npy" --axis "$axis" --memory "$memory")")
  rm -f "$dir/out.npy"
  scan_nosync_times+=("$(seconds "$cumulus" scan "$dir/in.npy" "$dir/out.npy" --axis "$axis" \
    --memory "$memory" --no-sync)")
  rm -f "$dir/out.npy"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
dd_time=$(median "${dd_times[@]}")
dd_sync_time=$(median "${dd_sync_times[@]}")
scan_time=$(median "${scan_times[@]}")
scan_nosync_time=$(median "${scan_nosync_times[@]}")
report "dd bs=16M" "$dd_time"
report "dd bs=16M conv=fsync" "$dd_sync_time"
report "cumulus scan" "$scan_time"
report "cumulus scan --no-sync" "$scan_nosync_time"
# Like with like: the scan syncs its output before naming it, as dd conv=fsync does; --no-sync
# leaves the writeback to the kernel, as plain dd does.
printf 'scan / dd conv=fsync throughput:  %.2f\n' "$(echo "$dd_sync_time / $scan_time" | bc -l)"
printf 'scan --no-sync / dd throughput:   %.2f\n' "$(echo "$dd_time / $scan_nosync_time" | bc -l)"

# Where the scan's time goes: the same scan under strace -c would perturb it, so the split comes
# from the kernel's own account (user time is the compute; system time the copies in and out of
# the page cache; the rest waiting, mostly on the final fsync).
rm -f "$dir/out.npy"
/usr/bin/time -f 'scan split: %e s elapsed, %U s user (compute), %S s system (read/write), %M KiB peak' \
  "$cumulus" scan "$dir/in.npy" "$dir/out.npy" --axis "$axis" --memory "$memory" >/dev/null
