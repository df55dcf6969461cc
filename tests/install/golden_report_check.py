#!/usr/bin/env python3
"""Checks a `vaectl decode --json` report against the golden tolerance.

The tolerance is tests/common/golden_tolerance.h's (golden README §8):
every uint8 value within 1 of the official decode and at most 0.1 % of them
off by one; an audio waveform, when the report has one, within 5e-5 (max
abs). A report without a reference (the demo model) passes with a note.

Usage: golden_report_check.py REPORT_JSON   (exit 1 outside the tolerance)
"""
import json
import sys

U8_MAX_OFF_BY_ONE_FRACTION = 0.001
AUDIO_MAX_ABS = 5e-5


def main(path):
    r = json.load(open(path))
    if r["reference_key"] is None:
        print("decoded", r["frames"], "frames (no reference on the demo model)")
        return 0
    n, off = r["values_compared"], r["values_differing_from_reference"]
    worst = r["max_abs_diff_vs_reference"]
    print(f"golden video: {off} of {n} uint8 values differ, max abs diff {worst}")
    if not n or worst > 1 or off > U8_MAX_OFF_BY_ONE_FRACTION * n:
        print("FAIL: video outside the golden tolerance (max 1, at most 0.1 % of values off by one)")
        return 1
    audio = r.get("audio")
    if audio:
        worst = audio["max_abs_diff_vs_reference"]
        print(f"golden audio: {audio['values_compared']} samples, max abs diff {worst}")
        if audio["reference_key"] is None or worst is None or worst > AUDIO_MAX_ABS:
            print("FAIL: audio outside the golden tolerance (max abs diff 5e-5)")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
