#!/usr/bin/env python3
"""What a diffusers worker holds for MiniMax-H3 decode, with its own VAEs
and with the vaed decode step instead: resident memory (VmRSS) of a fresh
process in each setup, measured in one run, and the parameter bytes of
each VAE part.

  own VAEs  diffusers' AutoencoderKLMiniMaxH3 and AutoencoderKLMiniMaxH3Audio
            at their default (released) configs, float32 on the CPU, every
            parameter written once (zeros: resident as loaded weights are;
            no checkpoint is read, so no page cache is counted)
  vaed      the same imports plus VaedH3DecodeStep (vaed_client.
            integrations.diffusers): the worker holds no decoder weights

The video VAE's encoder stays in a worker that encodes keyframes; the
figures split encoder and decoder bytes so that case can be read off too.
CPU memory stands in for GPU memory here (the same parameter bytes); GPU
figures need a device (unmeasured).

Run with the integrations venv (scripts/integration-env.sh --print-python)
and vaed_client on PYTHONPATH (<build>/python):

  PYTHONPATH=build/python $(scripts/integration-env.sh --print-python) \\
      ops/bench/worker_memory.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Dict

GIB = 1024.0 ** 3


def rss_bytes() -> int:
    """VmRSS of this process, bytes (/proc/self/status)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def materialized(model_class) -> "object":
    """`model_class()` at its default config, its parameters allocated on
    the CPU and written once (zeros)."""
    import torch
    with torch.device("meta"):
        model = model_class()
    model = model.to_empty(device="cpu")
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for b in model.buffers():
            b.zero_()
    return model


def part_bytes(model, prefix: str) -> int:
    return sum(p.numel() * p.element_size() for n, p in model.named_parameters()
               if n.startswith(prefix))


def measure(setup: str) -> Dict[str, float]:
    """Runs in the child: imports, builds `setup`, reports RSS and bytes."""
    import torch  # noqa: F401
    import diffusers
    from vaed_client.integrations.diffusers import VaedH3DecodeStep
    step = VaedH3DecodeStep(socket="/nonexistent/vaed.sock")  # connects on first decode only
    out: Dict[str, float] = {"setup": setup, "step": type(step).__name__}
    if setup == "own":
        t0 = time.monotonic()
        video = materialized(diffusers.AutoencoderKLMiniMaxH3)
        audio = materialized(diffusers.AutoencoderKLMiniMaxH3Audio)
        out["build_seconds"] = time.monotonic() - t0
        out["video_encoder_bytes"] = part_bytes(video, "encoder")
        out["video_decoder_bytes"] = part_bytes(video, "decoder")
        out["video_total_bytes"] = part_bytes(video, "")
        out["audio_total_bytes"] = part_bytes(audio, "")
        out["audio_decoder_bytes"] = part_bytes(audio, "decoder")
    out["rss_bytes"] = rss_bytes()
    return out


def run_child(setup: str) -> Dict[str, float]:
    done = subprocess.run([sys.executable, __file__, "--child", setup], capture_output=True,
                          text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"worker_memory: the {setup} process failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--child", choices=("own", "vaed"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    own, vaed = run_child("own"), run_child("vaed")
    print(f"worker with its own H3 VAEs   RSS {own['rss_bytes'] / GIB:7.2f} GiB "
          f"(built in {own['build_seconds']:.1f} s)")
    print(f"worker with the vaed step     RSS {vaed['rss_bytes'] / GIB:7.2f} GiB")
    print(f"  difference                      {(own['rss_bytes'] - vaed['rss_bytes']) / GIB:7.2f} GiB "
          f"({own['rss_bytes'] / vaed['rss_bytes']:.1f}x)")
    for key in ("video_decoder_bytes", "video_encoder_bytes", "video_total_bytes",
                "audio_decoder_bytes", "audio_total_bytes"):
        print(f"  {key:22s} {own[key] / GIB:7.2f} GiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"own_vaes": own, "vaed_step": vaed}, f, indent=2)


if __name__ == "__main__":
    main()
