"""Acceptance: scrape /metrics from a running daemon after a few
decodes; the exposition format is valid (promtool when Debian's prometheus
package is installed, and our own parser) and the counters and histograms
moved by exactly the expected amounts."""

from __future__ import annotations

import math
import time
import re
import shutil
import subprocess
import urllib.request
from collections import defaultdict
from typing import Dict, List, Tuple

import numpy as np
import pytest

import vaed_client
from conftest import Daemon, have_h3, h3_model_arg

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text: str) -> Tuple[Dict[str, str], List[Tuple[str, Dict[str, str], float]]]:
    """(TYPE by family, samples) of a Prometheus text exposition (format
    0.0.4); asserts the format rules the test relies on."""
    types: Dict[str, str] = {}
    helps = set()
    samples = []
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP "):
            helps.add(line.split()[2])
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(maxsplit=3)
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), line
            assert name not in types, f"family {name} declared twice"
            types[name] = kind
            continue
        assert not line.startswith("#"), f"unexpected comment: {line}"
        m = LINE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels_text, value = m.group(1), m.group(3) or "", m.group(4)
        labels = dict(LABEL.findall(labels_text))
        family = re.sub(r"_(bucket|sum|count|total)$", "", name)
        declared = name in types or family in types or re.sub(r"_(bucket|sum|count)$", "", name) in types
        assert declared, f"sample {name} has no # TYPE before it"
        samples.append((name, labels, float(value)))
    for name in types:
        assert name in helps, f"{name} has no # HELP"
    return types, samples


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return response.read().decode()


def value(samples, name: str, **labels) -> float:
    """Sum of the samples of `name` whose labels include `labels`."""
    return sum(v for n, l, v in samples
               if n == name and all(l.get(k) == str(x) for k, x in labels.items()))


def check_histograms(types, samples) -> None:
    """Buckets are cumulative, +Inf equals _count, for every series."""
    series = defaultdict(list)
    for name, labels, v in samples:
        if name.endswith("_bucket"):
            key = (name[:-7], tuple(sorted((k, x) for k, x in labels.items() if k != "le")))
            series[key].append((float(labels["le"]), v))
    assert series, "no histogram buckets"
    counts = {(n[:-6], tuple(sorted(l.items()))): v for n, l, v in samples if n.endswith("_count")}
    for key, buckets in series.items():
        assert types[key[0]] == "histogram"
        buckets.sort()
        values = [v for _, v in buckets]
        assert values == sorted(values), f"{key}: buckets not cumulative"
        assert math.isinf(buckets[-1][0]), f"{key}: no +Inf bucket"
        assert counts[key] == buckets[-1][1], f"{key}: +Inf bucket != _count"


@pytest.fixture
def metrics_daemon():
    args = ["--intra-op-threads", "1", "--metrics-address", "127.0.0.1:0"]
    if have_h3():
        args += ["--model", h3_model_arg()]
    d = Daemon(args)
    yield d
    assert d.stop() == 0, d.log()
    d.close()


def test_metrics_move_by_the_expected_amounts(metrics_daemon):
    with vaed_client.Client(metrics_daemon.socket) as c:
        url = c.status()["metrics_url"]
        assert re.match(r"^http://127\.0\.0\.1:\d+/metrics$", url), url
        types, before = parse_exposition(scrape(url))

        latent = np.random.default_rng(0).standard_normal((2, 32, 8, 8), dtype=np.float32)
        for _ in range(3):
            c.decode(latent, model="demo")
        # Refused by the daemon's decode (a plan does not look at profiles).
        with pytest.raises(vaed_client.ValidationError, match="profile"):
            c.decode(latent, model="demo", profile="bogus")
        # Straight to the daemon (the Python layer would stop it at the plan).
        with pytest.raises(vaed_client.VaedError):
            c._core.decode(vaed_client._core.DecodeArgs(
                model="no-such-model", latent=(1, 0, "float32", [2, 32, 8, 8]),
                output=(1, 0, "uint8", [2, 64, 64, 3])))
        if have_h3():
            grid = np.random.default_rng(1).standard_normal((1, 24, 7, 20, 20), dtype=np.float32)
            c.decode(grid, model="h3", stack_tiling="on", profile="optimized")
        # Gauges are published once a second by the control loop.
        time.sleep(1.5)
        text = scrape(url)

    if shutil.which("promtool"):
        check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                               text=True, timeout=60)
        # promtool prints lint advice (e.g. counter naming) on stdout and
        # exits non-zero only for format errors (and lint problems).
        assert check.returncode == 0, check.stdout + check.stderr
    types, after = parse_exposition(text)
    check_histograms(types, after)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert types["vaed_requests_total"] == "counter"
    assert delta("vaed_requests_total", outcome="ok", model="demo") == 3
    assert delta("vaed_requests_total", outcome="validation_error", model="demo") == 1
    # A client-chosen model name never becomes a label value.
    assert delta("vaed_requests_total", outcome="validation_error", model="unknown") == 1
    assert not any("no-such-model" in str(l) for _, l, _ in after)
    assert delta("vaed_decode_component_seconds_count", component="decode", model="demo",
                 resolution="64x64", stack="untiled", group_size="1") == 3
    assert delta("vaed_decode_component_seconds_sum", component="decode", model="demo") > 0
    assert value(after, "vaed_clients") >= 0 and value(after, "vaed_up") == 1
    assert value(after, "vaed_resident_weight_bytes") > 0
    if have_h3():
        assert delta("vaed_requests_total", outcome="ok", model="h3") == 1
        for component in ("decode", "video_vae.decode_latent", "video_vae.tile_decode",
                          "video_vae.tile_merge"):
            assert delta("vaed_decode_component_seconds_count", component=component,
                         model="h3", profile="optimized", stack="stacked",
                         resolution="320x320") == 1, component


def test_metrics_can_be_disabled():
    d = Daemon(["--intra-op-threads", "1", "--no-metrics"])
    try:
        with vaed_client.Client(d.socket) as c:
            c.decode(np.zeros((1, 32, 8, 8), np.float32), model="demo")
            status = c.status()
            assert status["metrics_url"] == ""
            assert status.get("components", []) == []
            # Outcomes are counted whether or not metrics are on.
            assert {"outcome": "ok", "count": 1} in status["outcomes"]
        assert "metrics: disabled" in d.log()
    finally:
        assert d.stop() == 0
        d.close()


def test_status_reports_component_latencies(metrics_daemon):
    with vaed_client.Client(metrics_daemon.socket) as c:
        for _ in range(4):
            c.decode(np.zeros((1, 32, 8, 8), np.float32), model="demo")
        status = c.status()
    comps = {x["component"]: x for x in status["components"]}
    assert comps["decode"]["count"] == 4
    assert 0 < comps["decode"]["p50_seconds"] <= comps["decode"]["p95_seconds"]
    assert comps["decode"]["sum_seconds"] > 0
    assert status["in_flight"] == 0


def test_idle_scrape_connections_never_take_the_daemons_descriptors(metrics_daemon):
    import os
    import socket
    with vaed_client.Client(metrics_daemon.socket) as c:
        url = c.status()["metrics_url"]
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    fds = lambda: len(os.listdir(f"/proc/{metrics_daemon.proc.pid}/fd"))
    before = fds()
    idle = []
    for _ in range(300):  # connect and send nothing
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        idle.append(s)
    time.sleep(1.0)
    held = fds() - before
    # 2 workers + 16 waiting + the one the accept thread serves, at most.
    assert held <= 24, f"the endpoint holds {held} descriptors for idle connections"
    with vaed_client.Client(metrics_daemon.socket) as c:  # the control socket still serves
        assert c.decode(np.zeros((1, 32, 8, 8), np.float32), model="demo").frames is not None
    for s in idle:
        s.close()
