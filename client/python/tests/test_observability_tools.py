"""The operator tools outside the daemon: the benchmark chart renderer
(ops/bench/plot_bench.py) on a real vaed_bench_matrix run, the Grafana
dashboard (ops/grafana/vaed-dashboard.json) against the metrics the daemon
exports, and the metrics on/off overhead benchmark
(ops/bench/bench_metrics_overhead.py) as a smoke run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import BINARY_DIR, H3, PYTHON_DIR, REPO, SHARED_DIR, VAED, need

PLOT = REPO / "ops" / "bench" / "plot_bench.py"
OVERHEAD = REPO / "ops" / "bench" / "bench_metrics_overhead.py"
DASHBOARD = REPO / "ops" / "grafana" / "vaed-dashboard.json"
BENCH_MATRIX = BINARY_DIR / "ops" / "bench" / "vaed_bench_matrix"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# The families the dashboard may query (daemon/server/metrics.h).
METRICS = {
    "vaed_decode_component_seconds", "vaed_requests_total", "vaed_queue_depth", "vaed_in_flight",
    "vaed_clients", "vaed_quarantined_clients", "vaed_resident_weight_bytes",
    "vaed_plan_cache_entries", "vaed_peak_rss_bytes", "vaed_group_generation", "vaed_up",
    "vaed_healthy", "vaed_rank_busy_seconds_total", "vaed_rank_tiles_total",
    "vaed_client_faults_total",
}
HISTOGRAMS = {"vaed_decode_component_seconds"}


def run_plot(*args, timeout=300):
    return subprocess.run([sys.executable, str(PLOT), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, MPLBACKEND="Agg"))


def test_plot_bench_renders_a_real_run(tmp_path):
    pytest.importorskip("matplotlib", reason="python3-matplotlib is not installed")
    need(H3 / "video_tiny_weights.safetensors")
    if not BENCH_MATRIX.exists():
        pytest.skip(f"{BENCH_MATRIX} is not built")
    results = tmp_path / "tiny.json"
    # The fastest real run: the tiny H3 decoder, a 2x2-tile x 1-window latent
    # ([1, 24, 4, 20, 20] -> 13 frames of 320x320), eager vs stacked, one
    # timed round, one intra-op thread.
    bench = subprocess.run(
        [str(BENCH_MATRIX), "--vaed", str(VAED), "--model-kind", "h3_video",
         "--weights", str(H3 / "video_tiny_weights.safetensors"),
         "--config", str(need(H3 / "video_tiny_config.json")), "--shapes", "1x24x4x20x20",
         "--modes", "eager,stacked", "--warmup", "0", "--iterations", "1", "--threads", "1",
         "--json", str(results)],
        capture_output=True, text=True, timeout=400)
    assert bench.returncode == 0, bench.stdout + bench.stderr
    doc = json.loads(results.read_text())
    ok = [r for r in doc["runs"] if r["status"] == "ok"]
    assert {r["mode"] for r in ok} == {"eager", "stacked"}
    assert all("video_vae.tile_decode" in r["timings_median_s"] for r in ok)

    out = tmp_path / "charts"
    run = run_plot(results, "--out", out, "--title", "test")
    assert run.returncode == 0, run.stdout + run.stderr
    printed = run.stdout.split()
    assert sorted(p.name for p in out.glob("*.png")) == sorted(
        ["tiny_components.png", "tiny_speedup.png", "tiny_amdahl.png"])
    assert sorted(printed) == sorted(str(p) for p in out.glob("*.png"))
    for path in out.glob("*.png"):
        data = path.read_bytes()
        assert data[:8] == PNG_SIGNATURE, path
        assert len(data) > 10_000, f"{path}: only {len(data)} bytes"


def test_plot_bench_rejects_missing_and_malformed_files(tmp_path):
    pytest.importorskip("matplotlib", reason="python3-matplotlib is not installed")
    out = tmp_path / "charts"
    run = run_plot(tmp_path / "absent.json", "--out", out)
    assert run.returncode == 2 and "no such file" in run.stderr, run.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{\"runs\": [")
    run = run_plot(bad, "--out", out)
    assert run.returncode == 2 and "not JSON" in run.stderr, run.stderr
    bad.write_text(json.dumps({"runs": [{"mode": "eager", "status": "ok"}]}))
    run = run_plot(bad, "--out", out)
    assert run.returncode == 2 and "timings_median_s" in run.stderr, run.stderr
    bad.write_text(json.dumps({"cold_start_s": {}}))
    run = run_plot(bad, "--out", out)
    assert run.returncode == 2 and "not a vaed_bench_matrix result" in run.stderr, run.stderr
    assert not list(out.glob("*.png"))


def dashboard_exprs(doc):
    """(where, PromQL) of every panel target and query variable."""
    exprs = []
    panels = list(doc["panels"])
    while panels:
        p = panels.pop(0)
        panels.extend(p.get("panels", []))
        for t in p.get("targets", []):
            exprs.append((f"panel {p['title']!r} {t['refId']}", t["expr"]))
    for v in doc["templating"]["list"]:
        q = v.get("query")
        exprs.append((f"variable {v['name']}", q["query"] if isinstance(q, dict) else q))
    return exprs


def metric_names(expr):
    """Metric names a PromQL expression selects: identifiers right before a
    {label matcher} or [range], and every vaed_* token (strings removed)."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    names = set(re.findall(r'([a-zA-Z_:][\w:]*)\s*[{\[]', bare))
    names |= set(re.findall(r'\b(vaed_\w+)', bare))
    names |= set(re.findall(r'label_values\(\s*([a-zA-Z_:][\w:]*)\s*[,)]', bare))
    out = set()
    for n in names:
        base = re.sub(r"_(bucket|sum|count)$", "", n)
        out.add(base if base in HISTOGRAMS else n)
    return out


def test_grafana_dashboard_queries_only_exported_metrics(tmp_path):
    doc = json.loads(DASHBOARD.read_text())
    assert 36 <= doc["schemaVersion"] <= 39
    assert [i["name"] for i in doc["__inputs"]] == ["DS_PROMETHEUS"]
    assert {v["name"] for v in doc["templating"]["list"]} >= {"instance", "model"}
    exprs = dashboard_exprs(doc)
    assert len(exprs) >= 20
    used = set()
    for where, expr in exprs:
        names = metric_names(expr)
        assert names, f"{where}: no metric in {expr!r}"
        assert names <= METRICS, f"{where}: unknown metric(s) {names - METRICS} in {expr!r}"
        used |= names
        if "$instance" not in expr and not where.startswith("variable instance"):
            pytest.fail(f"{where}: not filtered by $instance: {expr!r}")
    assert used == METRICS, f"not shown: {METRICS - used}"
    # Every panel and query uses the import-time data source input.
    text = DASHBOARD.read_text()
    uids = set(re.findall(r'"uid":\s*"([^"]*)"', text)) - {"-- Grafana --", "vaed-overview"}
    assert uids == {"${DS_PROMETHEUS}"}, uids
    # The quantile panels are the ones the runbook refers to.
    assert any("histogram_quantile(0.95, sum by (le, component) (rate("
               "vaed_decode_component_seconds_bucket" in e for _, e in exprs)
    # The daemon's source exports each of them (the dashboard must not drift).
    source = (REPO / "daemon" / "server" / "metrics.cc").read_text()
    source += (REPO / "daemon" / "server" / "metrics.h").read_text()
    for name in METRICS:
        assert f'"{name}"' in source or name in source, f"{name} is not in daemon/server/metrics.*"

    if shutil.which("promtool") is None:
        return  # Debian's prometheus package is absent: syntax not checked
    rules = ["groups:", "- name: vaed_dashboard", "  rules:"]
    for i, (_, expr) in enumerate(e for e in exprs if not e[0].startswith("variable")):
        rules += [f"  - record: vaed:dashboard_{i}",
                  "    expr: " + json.dumps(expr.replace("$instance", ".*")
                                            .replace("$model", ".*"))]
    path = tmp_path / "rules.yml"
    path.write_text("\n".join(rules) + "\n")
    check = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


def test_metric_names_helper():
    assert metric_names('sum by (le) (rate(vaed_decode_component_seconds_bucket'
                        '{component="vaed_x", a=~"$a"}[5m]))') == {"vaed_decode_component_seconds"}
    assert metric_names("rate(node_cpu_seconds_total[5m])") == {"node_cpu_seconds_total"}
    assert metric_names("label_values(vaed_up, instance)") == {"vaed_up"}


def test_bench_metrics_overhead_smoke(tmp_path):
    if not VAED.exists():
        pytest.fail(f"{VAED} is not built (build the default preset first)")
    helptext = subprocess.run([str(VAED), "--help"], capture_output=True, text=True,
                              timeout=60).stdout
    if "--no-metrics" not in helptext:
        pytest.skip(f"{VAED} has no --no-metrics (built before the metrics endpoint)")
    report = tmp_path / "overhead.json"
    run = subprocess.run(
        [sys.executable, str(OVERHEAD), "--vaed", str(VAED), "--shared", str(SHARED_DIR),
         "--shape", "2,32,16,16", "--iterations", "2", "--warmup", "1", "--json", str(report)],
        capture_output=True, text=True, timeout=400,
        env=dict(os.environ, PYTHONPATH=str(PYTHON_DIR)))
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    m = re.search(r"ratio on/off \(daemon decode, median\): (\d+\.\d+)", run.stdout)
    assert m and 0 < float(m.group(1)) < 100, run.stdout
    assert "within noise" in run.stdout or "OUTSIDE noise" in run.stdout
    doc = json.loads(report.read_text())
    sent = doc["decodes_per_daemon"]
    assert sent == 4  # first + 1 warm-up + 2 timed
    assert len(doc["samples_s"]["on"]["decode"]) == len(doc["samples_s"]["off"]["wall"]) == 2
    scrape = doc["scrape"]
    assert re.match(r"^http://127\.0\.0\.1:\d+/metrics$", scrape["url"]), scrape
    assert scrape["off_daemon_url"] == ""
    assert scrape["requests_total_ok"] == sent and scrape["decode_count"] == sent
    assert scrape["decode_sum_s"] > 0
    # Both daemons were stopped with SIGTERM and exited cleanly, their dirs removed.
    assert doc["daemons"]["on"]["exit_code"] == doc["daemons"]["off"]["exit_code"] == 0
    for d in doc["daemons"].values():
        assert not os.path.exists(d["dir"])
        with pytest.raises(ProcessLookupError):
            os.kill(d["pid"], 0)
