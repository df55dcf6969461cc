#!/usr/bin/env python3
"""Overhead of the Python client (vaed_client) over the C++ client, per decode.

Decodes the TAEF2 bikes latent (``data/taef2/video_bikes.safetensors``,
float32 [16, 32, 34, 80] -> uint8 [16, 272, 640, 3]) through an already
running daemon, on ONE connection and the same shared-memory regions, by
these paths:

  cpp         the C++ client's Decode, called from a C++ loop
              (``Client._time_cpp_decodes(latent_in_region, 1)``; the time is
              measured in C++ around Decode, no Python in it): the baseline.
  py-inplace  ``client.decode(latent)`` with ``latent`` from
              ``client.alloc_latent`` (filled once): the daemon reads it in
              place; Python adds placing, the plan cache, argument building
              and wrapping the reply.
  py-copy     ``client.decode(numpy_latent)``: a plain numpy array, copied
              into the client's staging region on every call.
  py-torch    ``client.decode(torch.from_numpy(numpy_latent))``: read through
              DLPack, then copied as py-copy (only when torch imports).

Each Python call is timed with ``time.perf_counter`` around it (wall time).
The paths are run alternately, one call of each per round and the order
rotated every round, so that load changes on the machine (other processes,
CPU frequency) hit every path alike. The summary uses medians (robust to an
outlier round) and the minimum; "overhead" is median(path) - median(cpp),
"paired" the median over rounds of path - cpp within the same round. The
daemon's own 'decode' timing (median) is shown for context, and for the
Python paths "wall-daemon", the median per call of wall time minus the
daemon's 'decode' seconds: what the client, the socket and the daemon's
request handling outside 'decode' add. It does not move with the decode
time, so it stays readable on a loaded machine where the decode itself
(seconds) varies far more than the overheads (milliseconds) between rounds;
``--frames`` shortens the decode.

Before timing, one decode per path checks the frames against the file's
reference ``decoded_u8`` (max |diff| <= 1); it also warms the shape bucket.

    PYTHONPATH=build/python /usr/bin/python3 client/python/bench/bench_overhead.py \
        --socket /run/vaed/vaed.sock --iterations 5 --json out/bench_overhead.json

Smoke test: ``--iterations 2 --warmup 0 --frames 2``.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

try:
    import vaed_client
except ImportError:
    sys.exit("vaed_client is not importable: run with PYTHONPATH=<repo>/build/python")

DEFAULT_SHARED = Path(__file__).resolve().parents[3].parent / "shared"


def measure(client, args, latent, reference, torch):
    """Runs the paths alternately; returns ({path: wall seconds per round},
    {path: daemon 'decode' seconds per round}), or (None, None) when a
    Python path's frames do not match the reference."""
    in_region = client.alloc_latent(latent.shape, latent.dtype)
    np.copyto(in_region, latent)                 # filled once, read in place from now on
    tensor = torch.from_numpy(latent) if torch is not None else None

    def py_call(obj):
        def call():
            start = time.perf_counter()
            result = client.decode(obj, model=args.model)
            return time.perf_counter() - start, result.timings["decode"], result
        return call

    def cpp_call():  # seconds measured in C++ around the C++ client's Decode
        wall_s, daemon_s = client._time_cpp_decodes(in_region, 1, model=args.model)[0]
        return wall_s, daemon_s, None

    paths = {"cpp": cpp_call, "py-inplace": py_call(in_region), "py-copy": py_call(latent)}
    if tensor is not None:
        paths["py-torch"] = py_call(tensor)

    # Check once per Python path (this also warms the daemon's shape bucket).
    for name, call in paths.items():
        _, _, result = call()
        if result is None:
            continue
        diff = int(np.abs(result.frames.astype(np.int16) - reference).max())
        print(f"check {name}: frames {list(result.frames.shape)}, max |diff| vs decoded_u8 "
              f"= {diff} ({'ok' if diff <= 1 else 'MISMATCH'}), in place "
              f"{result.inputs_in_place}")
        if diff > 1:
            return None, None

    wall = {name: [] for name in paths}
    daemon = {name: [] for name in paths}
    names = list(paths)
    for i in range(args.warmup + args.iterations):
        order = names[i % len(names):] + names[:i % len(names)]  # rotate each round
        for name in order:
            seconds, daemon_seconds, _ = paths[name]()
            if i >= args.warmup:
                wall[name].append(seconds)
                daemon[name].append(daemon_seconds)
    return wall, daemon


def main():
    parser = argparse.ArgumentParser(
        description="Python client overhead vs the C++ client (TAEF2 bikes decode)")
    parser.add_argument("--socket", default=os.environ.get("VAED_SOCKET") or "/run/vaed/vaed.sock",
                        help="daemon socket (default: $VAED_SOCKET or /run/vaed/vaed.sock)")
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED,
                        help=f"shared data directory (default: {DEFAULT_SHARED})")
    parser.add_argument("--model", default="taef2", help="model to decode with (default: taef2)")
    parser.add_argument("--iterations", type=int, default=5, help="timed rounds (default: 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default: 1)")
    parser.add_argument("--frames", type=int, default=0,
                        help="decode only the first N latent frames (default: all 16)")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch/DLPack path")
    parser.add_argument("--json", type=Path, help="also write the samples and summary here")
    args = parser.parse_args()
    if args.iterations < 1 or args.warmup < 0 or args.frames < 0:
        parser.error("--iterations must be >= 1, --warmup and --frames >= 0")

    path = args.shared / "data/taef2/video_bikes.safetensors"
    if not path.is_file():
        print(f"skipping: {path} not found (pass --shared DIR)")
        return 0
    data = vaed_client.read_safetensors(path)
    n = args.frames or data["latent"].shape[0]
    latent = np.array(data["latent"][:n])       # a plain, writable numpy array
    reference = data["decoded_u8"][:n]

    torch = None
    if not args.no_torch:
        try:
            import torch
        except Exception:  # ImportError, or a broken install
            print("torch does not import: skipping the py-torch path")

    try:
        with vaed_client.Client(args.socket) as client:
            wall, daemon = measure(client, args, latent, reference, torch)
    except vaed_client.DaemonUnavailable as e:
        print(f"no vaed daemon: {e}", file=sys.stderr)
        return 2
    if wall is None:
        return 1

    med = {name: statistics.median(s) for name, s in wall.items()}
    summary = {}
    print(f"\nTAEF2 bikes {list(latent.shape)} on model {args.model}: {args.iterations} rounds "
          f"after {args.warmup} warm-up, paths alternated")
    print(f"{'path':<11} {'median s':>9} {'min s':>8} {'overhead ms':>12} {'paired ms':>10} "
          f"{'ratio':>7} {'daemon decode s':>16} {'wall-daemon ms':>15}")
    for name, samples in wall.items():
        paired = statistics.median(p - c for p, c in zip(samples, wall["cpp"]))
        row = {"median_s": med[name], "min_s": min(samples),
               "overhead_ms": (med[name] - med["cpp"]) * 1e3, "paired_overhead_ms": paired * 1e3,
               "ratio": med[name] / med["cpp"],
               "daemon_decode_median_s": None, "wall_minus_daemon_median_ms": None,
               "samples_s": samples, "daemon_decode_s": daemon[name]}
        dd = dw = "-"
        if daemon[name]:
            row["daemon_decode_median_s"] = statistics.median(daemon[name])
            row["wall_minus_daemon_median_ms"] = statistics.median(
                w - d for w, d in zip(samples, daemon[name])) * 1e3
            dd = f"{row['daemon_decode_median_s']:.4f}"
            dw = f"{row['wall_minus_daemon_median_ms']:.2f}"
        summary[name] = row
        print(f"{name:<11} {row['median_s']:>9.4f} {row['min_s']:>8.4f} "
              f"{row['overhead_ms']:>12.2f} {row['paired_overhead_ms']:>10.2f} "
              f"{row['ratio']:>7.3f} {dd:>16} {dw:>15}")

    if args.iterations < 5:
        print(f"note: {args.iterations} rounds; the decode time varies far more than the client "
              "overhead between rounds, so medians, ratios and overheads (even negative ones) "
              "are noise here: compare the wall-daemon column, or use --iterations 5 or more")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(
            {"latent_shape": list(latent.shape), "model": args.model,
             "iterations": args.iterations, "warmup": args.warmup, "paths": summary}, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
