#!/usr/bin/env python3
"""Renders a `vaed_bench_matrix --json FILE` result to PNG charts (matplotlib, Agg).

    /usr/bin/python3 ops/bench/plot_bench.py out/bench/h3_tiny.json --out out/bench/plots

Writes three files into --out and prints their paths, one a line:

  <stem>_components.png  Time per component by mode: for each (dtype, latent
      shape) cell, one group of bars per measured mode (and group size S with
      --group-sizes), one bar per daemon timing component (the run's
      `timings_median_s`: decode, video_vae.decode_latent,
      audio_vae.decode_latent, video_vae.tile_decode, video_vae.tile_merge,
      video_vae.tile_communication, taef2.decode_latent, copies, ...), median
      seconds over the timed rounds. Components nest (decode contains
      decode_latent contains tile_decode), so the bars are side by side, not
      stacked. Modes the model does not support are named under the axis.
  <stem>_speedup.png  Speedup vs eager per mode: eager's median / the mode's,
      for the VAE component (`vae_speedup_vs_eager`) and the client wall time
      (`wall_speedup_vs_eager`), both against eager at the same group size;
      with --group-sizes also the VAE speedup over the same mode at the
      smallest size (`group.vae_speedup_vs_baseline_size`). 1.0 = no change.
  <stem>_amdahl.png  End-to-end speedup of a DiT+VAE generation as a function
      of the VAE's share s of its time (0..1), when only the VAE gets faster by
      k: 1 / ((1 - s) + s / k) (Amdahl's law: G. M. Amdahl, "Validity of the
      single processor approach to achieving large scale computing
      capabilities", AFIPS Spring Joint Computer Conference, 1967, pp.
      483-485). One curve per measured VAE speedup k (per mode; group sizes
      against the smallest), grey reference curves for k = 1.5, 2, 4 and k ->
      infinity (1 / (1 - s)), and the JSON's `amdahl` points (its --vae-share
      values) marked.

Exit status 2 with a message for a missing, unreadable or malformed file.
"""

import argparse
import json
import math
import os
import sys

# Component order on the bars; any other component follows, sorted.
ORDER = ["decode", "video_vae.decode_latent", "taef2.decode_latent", "audio_vae.decode_latent",
         "video_vae.tile_decode", "video_vae.tile_merge", "video_vae.tile_communication",
         "postprocess", "copy_in", "copy_out", "queue_wait"]
REFERENCE_K = [1.5, 2.0, 4.0]


class BenchError(Exception):
    """The results file cannot be plotted (the message says why)."""


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise BenchError(f"{path}: no such file (write one with vaed_bench_matrix --json FILE)")
    except OSError as e:
        raise BenchError(f"{path}: cannot read: {e.strerror}")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BenchError(f"{path}: not JSON: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        raise BenchError(f"{path}: not a vaed_bench_matrix result (no 'runs' list)")
    for i, run in enumerate(doc["runs"]):
        if not isinstance(run, dict):
            raise BenchError(f"{path}: runs[{i}] is not an object")
        if "mode" not in run and run.get("status") != "failed":
            raise BenchError(f"{path}: runs[{i}] has no 'mode'")
        if run.get("status") == "ok" and not isinstance(run.get("timings_median_s"), dict):
            raise BenchError(f"{path}: runs[{i}] ({run.get('mode')}) is ok but has no "
                             "'timings_median_s' object")
    for i, p in enumerate(doc.get("amdahl") or []):
        if not isinstance(p, dict) or not all(
                isinstance(p.get(k), (int, float)) for k in ("vae_share", "end_to_end_speedup")):
            raise BenchError(f"{path}: amdahl[{i}] lacks numeric vae_share/end_to_end_speedup")
    if not any(r.get("status") == "ok" for r in doc["runs"]):
        raise BenchError(f"{path}: no run has status 'ok', nothing to plot")
    return doc


def label(run):
    """The mode as vaed_bench_matrix names it ("stacked", or "stacked S=2" with --group-sizes)."""
    size = (run.get("request") or {}).get("group_size")
    return run["mode"] if size is None else f"{run['mode']} S={size}"


def ticks(ax, runs):
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels([label(r).replace(" S=", "\nS=") for r in runs],
                       rotation=30 if len(runs) > 6 else 0, fontsize=8 if len(runs) > 6 else 10)


def cells(doc):
    """[(title, [runs])] per (dtype, latent shape), in the file's order."""
    out = {}
    for run in doc["runs"]:
        if "mode" not in run:
            continue  # a cell that failed as a whole
        shape = "x".join(str(d) for d in run.get("latent_shape", []))
        out.setdefault(f"{run.get('dtype', '?')} [{shape}]", []).append(run)
    return list(out.items())


def components_of(runs):
    names = {c for r in runs if r.get("status") == "ok" for c in r["timings_median_s"]}
    return [c for c in ORDER if c in names] + sorted(names - set(ORDER))


def unsupported_note(ax, runs):
    skipped = [f"{label(r)} ({r.get('status')})" for r in runs if r.get("status") != "ok"]
    if skipped:
        ax.annotate("not measured: " + ", ".join(skipped), (0, -0.22), xycoords="axes fraction",
                    fontsize=7, color="0.35", annotation_clip=False)


def plot_components(plt, doc, title, path):
    groups = cells(doc)
    width = max(12, 1.5 * max(len(runs) for _, runs in groups) + 4)
    fig, axes = plt.subplots(len(groups), 1, figsize=(width, 4.8 * len(groups)), squeeze=False)
    for ax, (cell, runs) in zip(axes[:, 0], groups):
        ok = [r for r in runs if r.get("status") == "ok"]
        comps = components_of(ok)
        width = 0.8 / max(len(comps), 1)
        cmap = plt.get_cmap("tab20")
        for j, comp in enumerate(comps):
            xs = [i + (j - (len(comps) - 1) / 2) * width for i in range(len(ok))]
            ys = [r["timings_median_s"].get(comp, 0.0) or 0.0 for r in ok]
            ax.bar(xs, ys, width, label=comp, color=cmap(j % 20))
        ticks(ax, ok)
        ax.set_ylabel("median seconds (daemon timings)")
        ax.set_title(f"{title}: time per component, {cell}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        unsupported_note(ax, runs)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_speedup(plt, doc, title, path):
    groups = cells(doc)
    width = max(10, 1.3 * max(len(runs) for _, runs in groups) + 3)
    fig, axes = plt.subplots(len(groups), 1, figsize=(width, 4.4 * len(groups)), squeeze=False)
    series = [("VAE vs eager", lambda r: r.get("vae_speedup_vs_eager")),
              ("wall vs eager", lambda r: r.get("wall_speedup_vs_eager")),
              ("VAE vs smallest S",
               lambda r: (r.get("group") or {}).get("vae_speedup_vs_baseline_size"))]
    for ax, (cell, runs) in zip(axes[:, 0], groups):
        ok = [r for r in runs if r.get("status") == "ok"]
        present = [(n, f) for n, f in series if any(f(r) is not None for r in ok)]
        width = 0.8 / max(len(present), 1)
        for j, (name, get) in enumerate(present):
            xs = [i + (j - (len(present) - 1) / 2) * width for i in range(len(ok))]
            ys = [get(r) if get(r) is not None else float("nan") for r in ok]
            ax.bar(xs, ys, width, label=name)
            for x, y in zip(xs, ys):
                if not math.isnan(y):
                    ax.text(x, y, f"{y:.2f}", ha="center", va="bottom", fontsize=7)
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ticks(ax, ok)
        ax.set_ylabel("speedup (x, higher is faster)")
        ax.set_title(f"{title}: speedup vs eager, {cell}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
        unsupported_note(ax, runs)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def end_to_end(s, k):
    return 1.0 / ((1.0 - s) + s / k)


def plot_amdahl(plt, doc, title, path):
    xs = [i / 200 for i in range(201)]
    curves = []  # (key, legend name, k); key = (dtype, shape, label) as in the JSON's amdahl
    multi = len(cells(doc)) > 1
    for cell, runs in cells(doc):
        for r in runs:
            if r.get("status") != "ok":
                continue
            key = (r.get("dtype"), tuple(r.get("latent_shape", [])), label(r))
            name = label(r) + (f" ({cell})" if multi else "")
            if r.get("vae_speedup_vs_eager") and r["mode"] != "eager":
                curves.append((key, f"{name} vs eager", r["vae_speedup_vs_eager"]))
            g = r.get("group") or {}
            if g.get("vae_speedup_vs_baseline_size") and g.get("size") != g.get("baseline_size"):
                curves.append((None, f"{name} vs S={g['baseline_size']}",
                               g["vae_speedup_vs_baseline_size"]))
    merged = {}  # curves with the same k (to 3 decimals) share one line
    for key, name, k in curves:
        keys, names, _ = merged.setdefault(round(k, 3), ([], [], k))
        keys.append(key)
        names.append(name)
    curves = [(keys, names[0] if len(names) == 1 else f"{names[0]} (+{len(names) - 1} same k)", k)
              for keys, names, k in merged.values()]
    cmap = plt.get_cmap("tab10" if len(curves) <= 10 else "tab20")
    colour = {}
    fig, (full, zoom) = plt.subplots(1, 2, figsize=(16, 5.5))
    for k in REFERENCE_K:
        full.plot(xs, [end_to_end(s, k) for s in xs], color="0.7", ls="--", lw=1)
        full.text(1.0, end_to_end(1.0, k), f" k={k:g}", fontsize=7, color="0.45", va="center")
    inf = [(s, 1 / (1 - s)) for s in xs if s < 1 and 1 / (1 - s) <= max(REFERENCE_K) * 1.25]
    full.plot([p[0] for p in inf], [p[1] for p in inf], color="0.7", ls=":", lw=1,
              label="reference k = 1.5, 2, 4; dotted: VAE free (k -> inf)")
    for i, (keys, name, k) in enumerate(curves):
        for key in keys:
            colour.setdefault(key, cmap(i % cmap.N))
        for ax in (full, zoom):
            ax.plot(xs, [end_to_end(s, k) for s in xs], color=cmap(i % cmap.N), lw=1.6,
                    label=f"{name}: k = {k:.3f}" if ax is zoom else None)
    # eager's own entries (k = 1 by definition, "eager" or "eager S=2") are the baseline.
    pts = [p for p in doc.get("amdahl") or [] if str(p.get("mode")).split(" ")[0] != "eager"]
    for ax in (full, zoom):
        for p in pts:
            key = (p.get("dtype"), tuple(p.get("latent_shape", [])), p.get("mode"))
            ax.scatter([p["vae_share"]], [p["end_to_end_speedup"]], s=22, zorder=5,
                       color=colour.get(key, "k"), edgecolors="k")
        ax.axhline(1.0, color="k", lw=0.6)
        ax.grid(alpha=0.3)
        ax.set_xlabel("VAE share s of the DiT+VAE request's time (before the speedup)")
    if pts:
        zoom.scatter([], [], color="w", edgecolors="k", label="measured modes at --vae-share "
                     f"{sorted({p['vae_share'] for p in pts})} (JSON 'amdahl')")
    full.set_xlim(0, 1.08)
    full.set_ylim(0.9 * min([1.0] + [end_to_end(1.0, k) for _, _, k in curves]),
                  1.1 * max(REFERENCE_K + [k for _, _, k in curves]))
    full.set_ylabel("end-to-end speedup 1 / ((1 - s) + s / k)")
    full.set_title(f"{title}: Amdahl end-to-end speedup (Amdahl 1967)", fontsize=10)
    full.legend(fontsize=7, loc="upper left")
    zoom.set_xlim(0, 1)
    zoom.set_title("measured VAE speedups k (zoomed)", fontsize=10)
    zoom.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(results, out_dir, title=None):
    """Writes the three charts of `results` (a path) into out_dir; returns their paths."""
    doc = load(results)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    model = doc.get("model") or {}
    machine = doc.get("machine") or {}
    if title is None:
        title = (f"{model.get('kind', 'vaed')} on {machine.get('hostname', '?')} "
                 f"({machine.get('threads', '?')} threads)")
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.splitext(os.path.basename(results))[0]
    paths = [os.path.join(out_dir, f"{stem}_{kind}.png")
             for kind in ("components", "speedup", "amdahl")]
    plot_components(plt, doc, title, paths[0])
    plot_speedup(plt, doc, title, paths[1])
    plot_amdahl(plt, doc, title, paths[2])
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(description="vaed_bench_matrix JSON -> PNG charts")
    parser.add_argument("results", help="the JSON written by vaed_bench_matrix --json")
    parser.add_argument("--out", required=True, help="directory for the PNG files")
    parser.add_argument("--title", help="chart title prefix (default: model kind and host)")
    args = parser.parse_args(argv)
    try:
        paths = render(args.results, args.out, args.title)
    except BenchError as e:
        print(f"plot_bench: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"plot_bench: writing to {args.out}: {e}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
