#!/usr/bin/env python3
"""The JSON report of scripts/gpu/check.sh: figures, step records, the summary.

Usage:
  check_report.py set FILE KEY VALUE...     add KEY = VALUE pairs to the JSON
                                            object in FILE (created if absent);
                                            VALUE is parsed as JSON when it
                                            parses (numbers, true, null, ...),
                                            else kept as a string; KEY may be
                                            dotted (a.b sets {"a": {"b": ...}})
  check_report.py step STEPS NAME STATUS SECONDS TIMEOUT [REASON_FILE [FIGURES_FILE [BUDGET]]]
                                            append one step record to STEPS
                                            (JSON lines); BUDGET: a JSON
                                            object, how its timeout was cut
                                            (cap_s, min_s, left_s,
                                            kept_for_later_s)
  check_report.py final STEPS META OUT      write OUT = {meta..., steps: [...],
                                            summary: {status: count}} and print
                                            a table of the steps

A step's STATUS is one of passed, failed, missing (the program or option the
step needs does not exist in this build), skipped (REASON_FILE says why).
SECONDS and TIMEOUT are wall seconds. Standard library only; never raises on
a missing or malformed figures file (the record then says so), so one
step's broken output cannot lose the others' figures.
"""

import json
import os
import sys

STATUSES = ("passed", "failed", "missing", "skipped")


def parse_value(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def load_object(path):
    """The JSON object in `path`, {} when absent; (object, problem or None)."""
    if not path or not os.path.exists(path):
        return {}, None
    try:
        with open(path) as f:
            value = json.load(f)
    except (OSError, ValueError) as e:
        return {}, f"unreadable figures file {path}: {e}"
    if not isinstance(value, dict):
        return {}, f"figures file {path} holds {type(value).__name__}, not an object"
    return value, None


def cmd_set(path, pairs):
    if len(pairs) % 2:
        raise SystemExit("check_report.py set: KEY VALUE pairs expected")
    obj, problem = load_object(path)
    if problem:
        obj = {"_problem": problem}
    for key, value in zip(pairs[0::2], pairs[1::2]):
        node = obj
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = parse_value(value)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)


def read_text(path):
    if not path or not os.path.exists(path):
        return ""
    with open(path, errors="replace") as f:
        return f.read().strip()


def cmd_step(steps, name, status, seconds, timeout, reason_file="", figures_file="", budget=""):
    if status not in STATUSES:
        reason = f"step ended with unknown status '{status}'"
        status = "failed"
    else:
        reason = read_text(reason_file)
    figures, problem = load_object(figures_file)
    if problem:
        reason = (reason + "; " if reason else "") + problem
    record = {"name": name, "status": status, "seconds": round(float(seconds), 1),
              "timeout_s": int(timeout), "reason": reason, "figures": figures}
    if budget:
        try:
            record["budget"] = json.loads(budget)
        except ValueError:
            record["budget"] = budget
    with open(steps, "a") as f:
        f.write(json.dumps(record) + "\n")


def cmd_final(steps_path, meta_path, out_path):
    meta, _ = load_object(meta_path)
    steps = []
    if os.path.exists(steps_path):
        with open(steps_path) as f:
            steps = [json.loads(line) for line in f if line.strip()]
    summary = {s: sum(1 for r in steps if r["status"] == s) for s in STATUSES}
    report = dict(meta)
    report["steps"] = steps
    report["summary"] = summary
    with open(out_path, "w") as f:
        json.dump(report, f, indent=1)
    width = max([len(r["name"]) for r in steps] + [4])
    print(f"{'step':<{width}}  {'status':<8} {'seconds':>8}  reason")
    for r in steps:
        reason = r["reason"].splitlines()[0][:100] if r["reason"] else ""
        print(f"{r['name']:<{width}}  {r['status']:<8} {r['seconds']:>8.1f}  {reason}")
    print("summary: " + ", ".join(f"{n} {s}" for s, n in summary.items()))


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    command, args = argv[1], argv[2:]
    if command == "set" and len(args) >= 1:
        cmd_set(args[0], args[1:])
    elif command == "step" and 5 <= len(args) <= 8:
        cmd_step(*args)
    elif command == "final" and len(args) == 3:
        cmd_final(*args)
    else:
        print(f"check_report.py: bad command line {argv[1:]} (see --help)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
