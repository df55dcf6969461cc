#!/usr/bin/env python3
"""Sends vaed one decode with the injected sticky device error (device_fatal).

Usage: sticky_error.py --socket PATH --figures FILE [--shape 1,32,2,2] [--model NAME]

The daemon at --socket must run with executor.allow_fault_injection = true.
The request decodes a seeded random float32 latent of --shape (default: the
built-in demo model's [1, 32, 2, 2]) with ``inject_faults=["device_fatal"]``:
the rank reports a sticky CUDA error ("illegal memory access"), after which
the daemon must call itself unhealthy, refuse decodes and exit non-zero
(docs/reliability.md, "Sticky device errors"; tests/integration/lifecycle_test.cc checks the same
on the CPU). This script checks the client side: the decode fails, and the
daemon's status (if it still answers) is unhealthy. scripts/gpu/check.sh
then waits for the daemon to exit and records its exit status.

Writes its figures as JSON to --figures. Exit status: 0 the decode failed as
expected; 1 it succeeded or the daemon could not be reached; 2 bad command
line.
"""

import argparse
import json
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--socket", required=True)
    p.add_argument("--figures", required=True)
    p.add_argument("--shape", default="1,32,2,2")
    p.add_argument("--model", default="")
    o = p.parse_args()
    try:
        shape = [int(d) for d in o.shape.split(",")]
    except ValueError:
        p.error(f"--shape must be comma-separated integers, got {o.shape!r}")
    figures = {"latent_shape": shape}
    code = 1
    try:
        import numpy as np
        import vaed_client
        latent = np.random.default_rng(7).standard_normal(shape, dtype=np.float32)
        with vaed_client.Client(o.socket, client_name="sticky-error", reconnect_timeout=0) as c:
            try:
                c.decode(latent, model=o.model, inject_faults=["device_fatal"])
                figures["reason"] = "the decode with the injected device_fatal fault succeeded"
            except vaed_client.VaedError as e:
                figures["decode_error_code"] = e.code_name
                figures["decode_error"] = e.message[:300]
                code = 0
            try:
                status = c.status()
                figures["healthy_after"] = status.get("healthy")
                figures["health_after"] = status.get("health")
            except vaed_client.VaedError as e:
                figures["status_after"] = f"no status: {e.code_name}"
    except Exception as e:  # reported, not raised: the figures still go out
        figures["reason"] = f"{type(e).__name__}: {e}"
        code = 1
    with open(o.figures, "w") as f:
        json.dump(figures, f, indent=1)
    print("sticky_error: " + json.dumps(figures), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
