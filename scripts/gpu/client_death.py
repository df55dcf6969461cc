#!/usr/bin/env python3
"""A DiT worker dies while vaed decodes into its CUDA tensors.

Usage: client_death.py --socket PATH --vaectl PATH --latent FILE --figures FILE
                       [--model NAME] [--latent-shape 1,24,T,H,W] [--no-slow-tiles]
                       [--kill-after S] [--timeout S]

The ipc_client_death step of scripts/gpu/check.sh runs it against a vaed
daemon at --socket that decodes on CUDA ranks and allows fault injection
(for slow_tiles). It:

1. reads ``vaectl status --json`` (the daemon's regions before);
2. starts ``ipc_worker.py --mode long`` (beside this script; same python,
   same environment): a worker that allocates a random latent and its
   uint8 output as CUDA tensors with torch, registers them and decodes into
   them, one tile per decoder call, each 50 ms late (slow_tiles);
3. polls ``vaectl status --json`` until the worker's client (matched by
   pid in ``client_list``) has a decode in flight, waits --kill-after
   seconds more (the daemon is then writing into the worker's output) and
   SIGKILLs the worker, checking that it had not exited by itself;
4. polls status until the dead client is gone from ``client_list``, the
   daemon's ``regions`` are back to the count before the worker and
   ``in_flight`` is 0 (the cancelled decode ended), and reads ``healthy``;
5. starts ``ipc_worker.py`` (compare mode, --iterations 1) on the golden
   latent --latent: a fresh worker whose CUDA-path frames must equal the
   host path's, so the daemon still serves, correctly.

check.sh then checks that the daemon is still running and that its log has
no CUDA error. Writes its figures as JSON to --figures (the fresh worker's
under ``fresh_worker``). Exit status: 0 all of the above held; 1 one did
not (figures.reason); 3 the client has no CUDA path; 4 no CUDA device for
torch here; 2 bad command line.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

EXIT_PASSED, EXIT_FAILED, EXIT_MISSING, EXIT_SKIPPED = 0, 1, 3, 4
HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "ipc_worker.py")


class Failed(Exception):
    """The check did not hold; the message is the reason."""


def status(o):
    """The daemon's ``vaectl status --json`` as a dict (vaectl exits
    non-zero when the daemon is unhealthy; the JSON is read all the same)."""
    run = subprocess.run([o.vaectl, "--socket", o.socket, "status", "--json"],
                         capture_output=True, text=True, timeout=20)
    try:
        return json.loads(run.stdout)
    except ValueError:
        raise Failed(f"vaectl status --json printed no JSON (exit {run.returncode}): "
                     f"{run.stderr.strip()[:300]}")


DYING_NAME = "ipc-dying-worker"


def client_entry(s, pid):
    """The worker's entry in status' client_list (by pid, or by its client
    name where the daemon could not read the peer's pid), or None."""
    for c in s.get("client_list", []):
        if c.get("pid") == pid or (not c.get("pid") and c.get("name") == DYING_NAME):
            return c
    return None


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def wait_for(what, predicate, seconds, interval=0.2):
    """Polls predicate() until it returns a true value (returned) or
    `seconds` pass (Failed naming `what`)."""
    end = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise Failed(f"{what} within {seconds:.0f} s")
        time.sleep(interval)


def run(o, figures, deadline):
    left = lambda: max(1.0, deadline - time.monotonic())  # noqa: E731
    before = status(o)
    figures["daemon_regions_before_worker"] = before.get("regions")
    figures["daemon_clients_before_worker"] = before.get("clients")
    regions_before = before.get("regions", 0)

    worker_figures = os.path.join(o.workdir, "dying-worker.figures.json")
    command = [sys.executable, WORKER, "--mode", "long", "--socket", o.socket, "--model", o.model,
               "--latent-shape", o.latent_shape, "--client-name", DYING_NAME,
               "--figures", worker_figures]
    if o.slow_tiles:
        command.append("--slow-tiles")
    print("client_death: starting " + " ".join(command), flush=True)
    worker = subprocess.Popen(command)
    figures["worker_pid"] = worker.pid
    t_start = time.monotonic()

    def decode_in_flight():
        if worker.poll() is not None:
            return "exited"
        entry = client_entry(status(o), worker.pid)
        return entry if entry is not None and entry.get("in_flight", 0) >= 1 else None

    try:
        seen = wait_for("the worker's decode was not seen in flight (vaectl status)",
                        decode_in_flight, min(90.0, left()))
    except Failed:
        worker.kill()
        worker.wait()
        raise
    if seen == "exited":
        code = worker.returncode
        figures["worker"] = read_json(worker_figures)
        if code in (EXIT_MISSING, EXIT_SKIPPED):
            figures["reason"] = figures["worker"].get("reason", f"worker exit {code}")
            return code
        raise Failed(f"the worker exited with status {code} before its decode was seen "
                     f"in flight: {figures['worker'].get('reason', '')}")
    figures["decode_seen_in_flight_after_s"] = round(time.monotonic() - t_start, 2)
    figures["worker_regions_at_kill"] = seen.get("regions")
    figures["worker_region_bytes_at_kill"] = seen.get("region_bytes")
    time.sleep(o.kill_after)
    at_kill = status(o)
    figures["daemon_regions_at_kill"] = at_kill.get("regions")
    figures["daemon_in_flight_at_kill"] = at_kill.get("in_flight")
    if worker.poll() is not None:
        figures["worker"] = read_json(worker_figures)
        raise Failed(f"the worker's decode ended (exit {worker.returncode}) before the kill: "
                     "make it longer (--latent-shape)")
    os.kill(worker.pid, signal.SIGKILL)
    t_kill = time.monotonic()
    worker.wait()
    figures["worker"] = read_json(worker_figures)
    figures["worker_exit"] = ("SIGKILL" if worker.returncode == -signal.SIGKILL
                              else f"status {worker.returncode}")
    figures["killed_after_s"] = round(t_kill - t_start, 2)
    print(f"client_death: worker {worker.pid} killed {figures['killed_after_s']} s after it "
          f"started, {o.kill_after} s after its decode was seen in flight", flush=True)
    if worker.returncode != -signal.SIGKILL:
        raise Failed(f"the worker ended with {figures['worker_exit']}, not by the SIGKILL")

    # What the daemon did about it.
    marks = {}

    def released():
        s = status(o)
        now = round(time.monotonic() - t_kill, 2)
        if client_entry(s, worker.pid) is None:
            marks.setdefault("client_gone_after_s", now)
        if s.get("regions") == regions_before:
            marks.setdefault("regions_released_after_s", now)
        if s.get("in_flight", 1) == 0:
            marks.setdefault("in_flight_zero_after_s", now)
        return s if len(marks) == 3 else None

    try:
        after = wait_for("the dead client's regions were not all released, or its decode "
                         "did not end,", released, min(o.release_timeout, left()))
    except Failed:
        figures.update(marks)
        s = status(o)
        figures["daemon_regions_after"] = s.get("regions")
        figures["daemon_in_flight_after"] = s.get("in_flight")
        figures["dead_client_listed_after"] = client_entry(s, worker.pid) is not None
        raise
    figures.update(marks)
    figures["daemon_regions_after"] = after.get("regions")
    figures["healthy_after"] = after.get("healthy")
    figures["health_after"] = after.get("health")
    figures["outcomes_after"] = after.get("outcomes")
    figures["requests_failed_after"] = after.get("requests_failed")
    if not after.get("healthy"):
        raise Failed(f"the daemon is unhealthy after the client died: {after.get('health')}")

    # A fresh worker decodes, correctly.
    fresh_figures = os.path.join(o.workdir, "fresh-worker.figures.json")
    command = [sys.executable, WORKER, "--socket", o.socket, "--latent", o.latent,
               "--model", o.model, "--iterations", "1", "--client-name", "ipc-fresh-worker",
               "--figures", fresh_figures]
    print("client_death: starting " + " ".join(command), flush=True)
    try:
        code = subprocess.run(command, timeout=left()).returncode
    except subprocess.TimeoutExpired:
        code = "timeout"
    figures["fresh_worker"] = read_json(fresh_figures)
    figures["fresh_worker_exit"] = code
    if code != 0:
        raise Failed(f"a fresh worker's decode after the death failed (exit {code}): "
                     f"{figures['fresh_worker'].get('reason', '')}")
    return EXIT_PASSED


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--socket", required=True)
    p.add_argument("--vaectl", required=True)
    p.add_argument("--latent", required=True,
                   help="golden latent (safetensors) for the fresh worker's decode")
    p.add_argument("--model", default="")
    p.add_argument("--latent-shape", default="1,24,32,48,48",
                   help="the dying worker's latent (default: 6 windows x 4x4 tiles, ~5 s "
                        "with slow_tiles)")
    p.add_argument("--no-slow-tiles", dest="slow_tiles", action="store_false",
                   help="no slow_tiles fault (then the latent alone must make the decode last)")
    p.add_argument("--kill-after", type=float, default=1.0,
                   help="seconds between seeing the decode in flight and the SIGKILL")
    p.add_argument("--release-timeout", type=float, default=30.0,
                   help="seconds the daemon has to drop the dead client and its regions")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds for the whole check")
    p.add_argument("--figures", required=True)
    o = p.parse_args()
    deadline = time.monotonic() + o.timeout
    figures = {"latent_shape": o.latent_shape, "slow_tiles": o.slow_tiles,
               "kill_after_s": o.kill_after}
    with tempfile.TemporaryDirectory(prefix="vaed-client-death-") as workdir:
        o.workdir = workdir
        try:
            code = run(o, figures, deadline)
        except Failed as e:
            figures["reason"] = str(e)
            code = EXIT_FAILED
        except Exception as e:  # the figures gathered so far still go out
            figures["reason"] = f"{type(e).__name__}: {e}"
            code = EXIT_FAILED
    with open(o.figures, "w") as f:
        json.dump(figures, f, indent=1)
    print("client_death: " + json.dumps(figures), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
