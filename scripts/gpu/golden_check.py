#!/usr/bin/env python3
"""Decodes every golden H3 case through a running vaed and compares with the golden.

Usage: golden_check.py --vaectl PATH --socket PATH --golden DIR --model NAME --figures FILE

The daemon at --socket serves --model as kind h3 with the tiny golden
decoders (video + audio, float32). DIR is a golden folder: ../shared/golden/h3
or its re-packed copy (scripts/gpu/repack_golden.py). Per case:

* video (video_case_*.safetensors): ``vaectl decode --reference-key
  frames_u8`` (uint8 [F, H, W, 3]); passes when every value is within 1 of
  the golden and at most 0.1 % are off by one (the documented tolerance,
  tests/common/golden_tolerance.h, golden README §8). Where the file holds
  raw golden output (``frames_f32_head``, float32 [1, 3, 2, H, W], or the
  whole ``frames_f32``) and the Python client imports, the case is also
  decoded as float32 and its max abs difference from the raw golden is
  checked against 1e-5; for every case the SHA-256 of the whole raw output
  is compared with the one video_cases.json records (bitwise equality: a
  figure, not a condition, since other kernels round differently).
* audio (audio_case_*.safetensors): ``vaectl decode --audio-latent``; max
  abs difference from ``waveform`` within 5e-5.

Writes {cases: {name: {...}}, passed, failed, tolerance} to --figures and
exits 0 when every case passed, 1 when one failed or could not be decoded,
2 on a bad command line.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

U8_MAX_OFF_BY_ONE_FRACTION = 0.001  # tests/common/golden_tolerance.h
VIDEO_F32_MAX_ABS = 1e-5
AUDIO_F32_MAX_ABS = 5e-5


def vaectl_json(args, vaectl, socket):
    """Runs `vaectl --socket S --json decode ARGS`: (json or None, error text)."""
    cmd = [vaectl, "--socket", socket, "--json", "decode", "--progress", "none"] + args
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return None, f"vaectl exited {done.returncode}: {done.stderr.strip()[-400:]}"
    try:
        return json.loads(done.stdout), ""
    except ValueError as e:
        return None, f"vaectl printed no JSON ({e}): {done.stdout[-200:]}"


def check_video_u8(path, o):
    report, error = vaectl_json([path, "--model", o.model, "--format", "none", "--reference-key",
                                 "frames_u8", "--original-key", "none"], o.vaectl, o.socket)
    if report is None:
        return {"passed": False, "error": error}
    values = int(report.get("values_compared") or 0)
    differing = int(report.get("values_differing_from_reference") or 0)
    max_abs = report.get("max_abs_diff_vs_reference")
    fraction = differing / values if values else None
    passed = (values > 0 and max_abs is not None and max_abs <= 1 and
              fraction <= U8_MAX_OFF_BY_ONE_FRACTION and report.get("nonfinite_outputs", 0) == 0)
    return {"passed": passed, "u8_values": values, "u8_differing": differing,
            "u8_max_abs_diff": max_abs, "u8_differing_fraction": fraction,
            "compute_dtype": report.get("compute_dtype"),
            "decode_s": report.get("timings", {}).get("decode"),
            "error": "" if passed else "outside the uint8 tolerance" if values else
            "nothing compared: " + "; ".join(report.get("notes", []))}


def reference_raw(tensors):
    """(raw golden float32 [1, 3, n, H, W], frames n) of a case's tensors, or (None, 0)."""
    for key in ("frames_f32", "frames_f32_head"):
        if key in tensors:
            return tensors[key], int(tensors[key].shape[2])
    return None, 0


def check_video_raw(path, name, o, recorded):
    """Max abs vs the raw golden and SHA-256 vs video_cases.json (needs the Python client)."""
    try:
        import numpy as np
        import vaed_client
    except ImportError as e:
        return {"raw_status": "missing", "raw_error": f"the Python client does not import: {e}"}
    tensors = vaed_client.read_safetensors(path)
    reference, frames = reference_raw(tensors)
    latent = tensors["latent"]
    with vaed_client.Client(o.socket, client_name="golden-check") as client:
        result = client.decode(latent, model=o.model, format="float32", copy=True)
    ours = result.frames  # [F, 3, H, W]
    whole = np.ascontiguousarray(ours.transpose(1, 0, 2, 3)).astype("<f4").tobytes()
    expected = recorded.get(name, {}).get("sha256_frames_f32_raw_LE_bytes")
    figures = {"raw_bitwise_equal_to_official":
               None if expected is None else hashlib.sha256(whole).hexdigest() == expected}
    if reference is None:
        figures.update(raw_status="skipped",
                       raw_error="no raw golden values in the file (SHA-256 compared only)")
        return figures
    head = np.ascontiguousarray(ours[:frames].transpose(1, 0, 2, 3))[None]  # [1, 3, n, H, W]
    if head.shape != reference.shape:
        figures.update(raw_status="failed",
                       raw_error=f"raw output {list(head.shape)} vs golden {list(reference.shape)}")
        return figures
    max_abs = float(np.max(np.abs(head.astype(np.float64) - reference.astype(np.float64))))
    ok = bool(np.isfinite(max_abs)) and max_abs <= VIDEO_F32_MAX_ABS
    figures.update(raw_status="passed" if ok else "failed", raw_frames_compared=frames,
                   raw_max_abs_diff=max_abs,
                   raw_error="" if ok else f"raw max abs {max_abs} over {VIDEO_F32_MAX_ABS}")
    return figures


def check_audio(path, o, scratch):
    report, error = vaectl_json(["--audio-latent", path, "--model", o.model, "--audio-out",
                                 os.path.join(scratch, "audio.wav")], o.vaectl, o.socket)
    if report is None:
        return {"passed": False, "error": error}
    audio = report.get("audio") or {}
    max_abs = audio.get("max_abs_diff_vs_reference")
    passed = max_abs is not None and max_abs <= AUDIO_F32_MAX_ABS and audio.get("nonfinite") == 0
    return {"passed": passed, "max_abs_diff": max_abs, "values": audio.get("values_compared"),
            "decode_s": report.get("timings", {}).get("decode"),
            "error": "" if passed else f"audio max abs {max_abs} over {AUDIO_F32_MAX_ABS}"}


def write_figures(path, cases):
    """Writes the figures of the cases so far; returns the names of those that failed."""
    failed = sorted(n for n, c in cases.items() if not c["passed"])
    figures = {"cases": cases, "passed": len(cases) - len(failed), "failed": failed,
               "tolerance": {"u8_max_off_by_one_fraction": U8_MAX_OFF_BY_ONE_FRACTION,
                             "video_f32_max_abs": VIDEO_F32_MAX_ABS,
                             "audio_f32_max_abs": AUDIO_F32_MAX_ABS}}
    with open(path, "w") as f:
        json.dump(figures, f, indent=1)
    return failed


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("--vaectl", "--socket", "--golden", "--model", "--figures"):
        p.add_argument(name, required=True)
    o = p.parse_args()
    recorded = {}
    cases_json = os.path.join(o.golden, "video_cases.json")
    if os.path.exists(cases_json):
        with open(cases_json) as f:
            recorded = json.load(f)
    cases = {}
    with tempfile.TemporaryDirectory() as scratch:
        for file in sorted(os.listdir(o.golden)):
            kind, _, rest = file.partition("_case_")
            if kind not in ("video", "audio") or not rest.endswith(".safetensors"):
                continue
            name = rest[:-len(".safetensors")]
            path = os.path.join(o.golden, file)
            try:
                if kind == "video":
                    case = check_video_u8(path, o)
                    case.update(check_video_raw(path, name, o, recorded))
                    if case["raw_status"] == "failed":
                        case["passed"] = False
                else:
                    case = check_audio(path, o, scratch)
            except Exception as e:  # one case's trouble must not hide the others
                case = {"passed": False, "error": f"{type(e).__name__}: {e}"}
            cases[f"{kind}_{name}"] = case
            print(f"golden_check: {kind} {name}: {json.dumps(case)}", flush=True)
            write_figures(o.figures, cases)  # after each case: a timeout keeps them
    failed = write_figures(o.figures, cases)
    if not cases:
        print(f"golden_check: no golden cases in {o.golden}", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
