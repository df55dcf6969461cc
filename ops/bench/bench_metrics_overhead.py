#!/usr/bin/env python3
"""Does metrics collection cost decode time? Two daemons, metrics on vs off.

Starts TWO `vaed` daemons itself, each on a private socket in its own 0700
temp dir, with the same model and thread settings; they differ only in

  on   --metrics-address 127.0.0.1:0  (collection + the Prometheus endpoint
                                      on a free loopback port)
  off  --no-metrics                   (no collection, no endpoint)

Model: TAEF2 (`--taef2-weights <shared>/data/taef2/taef2_decoder.safetensors`)
when the shared pack has it, else the built-in demo model (the TAEF2
architecture with seeded weights); `--model-kind` forces one. The latent is
float32 random normal of `--shape` (default 4,32,34,80: 4 frames of 272x640),
allocated in each client's shared-memory region and filled once, so every
decode reads it in place.

Each daemon gets one first (cold) decode of the shape, then `--warmup`
untimed rounds and `--iterations` timed rounds. A round decodes once on each
daemon, one decode at a time; the order alternates every round (on-off,
off-on, ...) so that load drifts on the machine hit both alike, and
`--intra-op-threads` (default 1) keeps one decode from needing every core.
Per daemon it prints the median and min of the daemon's `decode` timing and
of the client wall time (Python `decode()` call), and the on/off ratio of
the medians. Noise estimates, from the same run:

  paired     per round, on / off (the two decodes are seconds apart); the
             median of these ratios and their interquartile range;
  halves     each daemon's median of the first half of the rounds over the
             second half's: how much one configuration differs from itself.

"within noise" means |paired median - 1| is at most the larger of half the
paired IQR and the halves' largest deviation from 1. At the end it scrapes
the "on" daemon's endpoint once (URL from `client.status()["metrics_url"]`)
and shows that the request counter and the decode histogram count moved by
the number of decodes sent, and that the "off" daemon reports no URL.

    PYTHONPATH=build/python nice -n 19 /usr/bin/python3 \
        ops/bench/bench_metrics_overhead.py --iterations 20 --json out/bench/metrics_overhead.json

Exit status: 0 measured; 2 the daemon could not be started or used; 3 the
daemon binary has no --no-metrics (built before metrics existed).
"""

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def quantile(values, q):
    """Linear-interpolated quantile of a non-empty list."""
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


class Daemon:
    """One vaed on a private socket; stop() sends SIGTERM and waits."""

    def __init__(self, binary, name, args):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix=f"vaed-metrics-{name}-")
        os.chmod(self.dir, 0o700)
        self.socket = os.path.join(self.dir, "vaed.sock")
        self.log_path = os.path.join(self.dir, "vaed.log")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen([str(binary), "--socket", self.socket, *args],
                                         stdout=log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(self.socket):
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"vaed ({self.name}) exited with {self.proc.returncode}:\n"
                                   f"{self.log()[-3000:]}")
            time.sleep(0.05)
        raise RuntimeError(f"vaed ({self.name}) made no socket in {timeout} s:\n"
                           f"{self.log()[-3000:]}")

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self):
        """SIGTERM, then SIGKILL after 30 s; returns the exit code."""
        code = self.proc.poll()
        if code is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        return code


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def sample_sum(text, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for m in re.finditer(rf'^{re.escape(name)}(?:\{{(.*)\}})? (\S+)$', text, re.M):
        have = dict(re.findall(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"', m.group(1) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(2))
    return total


def summarize(on, off):
    """on/off: {"decode": [...], "wall": [...]} per timed round, same order."""
    out = {}
    n = len(on["decode"])
    for key in ("decode", "wall"):
        paired = [a / b for a, b in zip(on[key], off[key])]
        row = {"on_median_s": statistics.median(on[key]), "on_min_s": min(on[key]),
               "off_median_s": statistics.median(off[key]), "off_min_s": min(off[key]),
               "paired_ratios": paired, "paired_median": statistics.median(paired),
               "paired_iqr": [quantile(paired, 0.25), quantile(paired, 0.75)]}
        row["ratio_median"] = row["on_median_s"] / row["off_median_s"]
        row["ratio_min"] = row["on_min_s"] / row["off_min_s"]
        halves = {}
        if n >= 2:
            for name, xs in (("on", on[key]), ("off", off[key])):
                halves[name] = statistics.median(xs[:n // 2]) / statistics.median(xs[n - n // 2:])
        row["halves_ratio"] = halves
        noise = max([(row["paired_iqr"][1] - row["paired_iqr"][0]) / 2] +
                    [abs(h - 1) for h in halves.values()])
        row["noise"] = noise
        row["within_noise"] = abs(row["paired_median"] - 1) <= noise
        out[key] = row
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description="decode time with metrics on vs off (two daemons)")
    p.add_argument("--vaed", type=Path, default=REPO / "build" / "daemon" / "vaed",
                   help="daemon binary (default: build/daemon/vaed)")
    p.add_argument("--shared", type=Path, default=REPO.parent / "shared",
                   help="shared data pack (default: ../shared)")
    p.add_argument("--model-kind", choices=["auto", "taef2", "demo"], default="auto",
                   help="auto: taef2 when its weights are in --shared, else demo")
    p.add_argument("--shape", default="4,32,34,80", help="latent shape N,32,h,w")
    p.add_argument("--intra-op-threads", type=int, default=1, help="per daemon (default: 1)")
    p.add_argument("--iterations", type=int, default=10, help="timed rounds (default: 10)")
    p.add_argument("--warmup", type=int, default=2, help="untimed rounds (default: 2)")
    p.add_argument("--start-timeout", type=float, default=120, help="seconds (default: 120)")
    p.add_argument("--json", type=Path, help="also write samples and summary here")
    args = p.parse_args(argv)
    if args.iterations < 1 or args.warmup < 0 or args.intra_op_threads < 1:
        p.error("--iterations and --intra-op-threads must be >= 1, --warmup >= 0")
    try:
        shape = [int(x) for x in args.shape.split(",")]
    except ValueError:
        p.error(f"--shape {args.shape!r}: want comma-separated integers, e.g. 4,32,34,80")
    try:
        import vaed_client
    except ImportError:
        sys.exit("vaed_client is not importable: run with PYTHONPATH=<repo>/build/python")
    if not args.vaed.is_file():
        print(f"bench_metrics_overhead: {args.vaed} is not built", file=sys.stderr)
        return 2
    helptext = subprocess.run([str(args.vaed), "--help"], capture_output=True, text=True,
                              timeout=60).stdout
    if "--no-metrics" not in helptext:
        print(f"bench_metrics_overhead: {args.vaed} has no --no-metrics (built before the "
              "metrics endpoint); rebuild it", file=sys.stderr)
        return 3

    weights = args.shared / "data" / "taef2" / "taef2_decoder.safetensors"
    kind = args.model_kind
    if kind == "auto":
        kind = "taef2" if weights.is_file() else "demo"
    model_args = ["--intra-op-threads", str(args.intra_op_threads)]
    if kind == "taef2":
        if not weights.is_file():
            print(f"bench_metrics_overhead: {weights} not found", file=sys.stderr)
            return 2
        model_args += ["--taef2-weights", str(weights)]
    latent = np.random.default_rng(20261201).standard_normal(shape, dtype=np.float32)

    daemons, clients, codes = {}, {}, {}
    try:
        daemons["on"] = Daemon(args.vaed, "on", model_args + ["--metrics-address", "127.0.0.1:0"])
        daemons["off"] = Daemon(args.vaed, "off", model_args + ["--no-metrics"])
        for d in daemons.values():
            d.wait_ready(args.start_timeout)
        inputs = {}
        for name, d in daemons.items():
            clients[name] = vaed_client.Client(d.socket, client_name=f"bench-metrics-{name}")
            inputs[name] = clients[name].alloc_latent(latent.shape, latent.dtype)
            np.copyto(inputs[name], latent)

        def decode(name):
            start = time.perf_counter()
            result = clients[name].decode(inputs[name])
            return time.perf_counter() - start, result.timings["decode"]

        first = {}
        for name in ("on", "off"):
            first[name] = decode(name)[0]
        samples = {name: {"decode": [], "wall": []} for name in ("on", "off")}
        for i in range(args.warmup + args.iterations):
            for name in (("on", "off") if i % 2 == 0 else ("off", "on")):
                wall, dec = decode(name)
                if i >= args.warmup:
                    samples[name]["wall"].append(wall)
                    samples[name]["decode"].append(dec)
        sent = 1 + args.warmup + args.iterations

        url = clients["on"].status().get("metrics_url", "")
        off_url = clients["off"].status().get("metrics_url", "")
        scraped = {"url": url, "off_daemon_url": off_url}
        if url:
            time.sleep(1.2)  # gauges are refreshed once a second
            text = scrape(url)
            scraped.update({
                "requests_total_ok": sample_sum(text, "vaed_requests_total", outcome="ok"),
                "decode_count": sample_sum(text, "vaed_decode_component_seconds_count",
                                           component="decode"),
                "decode_sum_s": sample_sum(text, "vaed_decode_component_seconds_sum",
                                           component="decode"),
                "exposition_lines": len(text.splitlines())})
    except (RuntimeError, OSError, vaed_client.VaedError) as e:
        print(f"bench_metrics_overhead: {e}", file=sys.stderr)
        return 2
    finally:
        for c in clients.values():
            c.close()
        codes = {name: d.stop() for name, d in daemons.items()}
        if any(code != 0 for code in codes.values()):
            print(f"bench_metrics_overhead: daemon exit codes {codes}", file=sys.stderr)

    summary = summarize(samples["on"], samples["off"])
    print(f"\nmetrics on vs off: {kind} latent {shape}, {args.intra_op_threads} intra-op "
          f"thread(s) per daemon, {args.iterations} rounds after {args.warmup} warm-up, "
          f"order alternating; first decodes on {first['on']:.3f} s, off {first['off']:.3f} s")
    print(f"{'seconds':<14} {'on med':>8} {'on min':>8} {'off med':>8} {'off min':>8} "
          f"{'on/off med':>10} {'paired':>7} {'paired IQR':>13} {'halves on/off':>14} verdict")
    for key, title in (("decode", "daemon decode"), ("wall", "client wall")):
        r = summary[key]
        halves = "/".join(f"{r['halves_ratio'][k]:.3f}" for k in ("on", "off")
                          if k in r["halves_ratio"]) or "-"
        verdict = "within noise" if r["within_noise"] else "OUTSIDE noise"
        print(f"{title:<14} {r['on_median_s']:>8.4f} {r['on_min_s']:>8.4f} "
              f"{r['off_median_s']:>8.4f} {r['off_min_s']:>8.4f} {r['ratio_median']:>10.4f} "
              f"{r['paired_median']:>7.4f} {r['paired_iqr'][0]:>6.3f}-{r['paired_iqr'][1]:<6.3f} "
              f"{halves:>14} {verdict} (noise +-{r['noise']:.4f})")
    print(f"ratio on/off (daemon decode, median): {summary['decode']['ratio_median']:.4f}")
    if scraped.get("url"):
        print(f"scraped {scraped['url']} ({scraped['exposition_lines']} lines): "
              f"vaed_requests_total{{outcome=\"ok\"}} = {scraped['requests_total_ok']:g}, "
              f"vaed_decode_component_seconds_count{{component=\"decode\"}} = "
              f"{scraped['decode_count']:g} (decodes sent: {sent}), _sum = "
              f"{scraped['decode_sum_s']:.3f} s; off daemon metrics_url = "
              f"{scraped['off_daemon_url']!r}")
    else:
        print("the 'on' daemon reports no metrics_url: endpoint not served (see its log)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(
            {"model_kind": kind, "latent_shape": shape, "intra_op_threads": args.intra_op_threads,
             "iterations": args.iterations, "warmup": args.warmup, "decodes_per_daemon": sent,
             "first_decode_s": first, "samples_s": samples, "summary": summary,
             "scrape": scraped,
             "daemons": {name: {"pid": d.proc.pid, "dir": d.dir, "exit_code": codes.get(name)}
                         for name, d in daemons.items()}}, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
