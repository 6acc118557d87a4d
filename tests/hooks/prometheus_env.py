"""A real node_exporter (textfile collector only) and a real Prometheus on loopback ports, for
the tests (the recipe of ../shared/notes/loopback-services.md). Holds no tests itself.

A missing binary skips with the reason, a failure under ``CI=true`` (tests/skip_policy.py; the
packages come from .ci/apt-packages.txt).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from slurmkit.waiting import wait_until

BINARIES = {"prometheus": "prometheus", "promtool": "prometheus",
            "prometheus-node-exporter": "prometheus-node-exporter",
            "prometheus-alertmanager": "prometheus-alertmanager", "amtool": "prometheus-alertmanager"}


def need(*names: str) -> dict:
    """``{name: path}`` of the binaries, or skip / fail naming the missing Debian packages."""
    found = {n: shutil.which(n) for n in names}
    missing = sorted({BINARIES[n] for n, p in found.items() if p is None})
    if missing:
        pytest.skip("Debian packages missing: " + " ".join(missing))
    return found


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class PromStack:
    """node_exporter reading ``textfile_dir`` and a Prometheus scraping it every second, with
    ``rule_files`` loaded; both under ``root``. :attr:`url` is Prometheus' base URL."""

    def __init__(self, root: Path, textfile_dir: Path, rule_files=(), prometheus: bool = True, sysfs=None):
        """``prometheus=False``: node_exporter alone (:meth:`node_exporter_text`); ``sysfs``: a
        (fake) sysfs root node_exporter's infiniband collector reads (``--path.sysfs``)."""
        bins = need(*(("prometheus",) if prometheus else ()), "prometheus-node-exporter")
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        ne_port, prom_port = free_port(), free_port()
        self.node_exporter_addr = f"127.0.0.1:{ne_port}"
        self.url = f"http://127.0.0.1:{prom_port}"
        rules = "".join(f"\n  - {json.dumps(str(Path(r).resolve()))}" for r in rule_files)
        (self.root / "prom.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            + (f"rule_files:{rules}\n" if rules else "")
            + "scrape_configs:\n  - job_name: node\n"
            f"    static_configs: [{{targets: ['{self.node_exporter_addr}']}}]\n")
        self.logs = {}
        self.procs = []
        self.logs["node_exporter"] = open(self.root / "node_exporter.log", "w")
        self.procs.append(subprocess.Popen(
            [bins["prometheus-node-exporter"], f"--web.listen-address={self.node_exporter_addr}",
             "--collector.disable-defaults", "--collector.textfile",
             f"--collector.textfile.directory={textfile_dir}",
             *((f"--path.sysfs={sysfs}", "--collector.infiniband") if sysfs is not None else ())],
            stdout=self.logs["node_exporter"], stderr=subprocess.STDOUT))
        if not prometheus:
            return
        self.logs["prometheus"] = open(self.root / "prometheus.log", "w")
        self.procs.append(subprocess.Popen(
            [bins["prometheus"], f"--config.file={self.root / 'prom.yml'}",
             f"--storage.tsdb.path={self.root / 'data'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=self.logs["prometheus"], stderr=subprocess.STDOUT))

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in self.logs.values():
            f.close()

    def node_exporter_text(self, timeout: float = 30) -> str:
        """What node_exporter serves on /metrics now (waits for it to listen)."""
        def fetch():
            try:
                with urllib.request.urlopen(f"http://{self.node_exporter_addr}/metrics", timeout=10) as r:
                    return r.read().decode()
            except OSError:
                return None

        return wait_until(fetch, timeout, 0.2, f"node_exporter listening on {self.node_exporter_addr}",
                          lambda: f"log: {self.node_exporter_log()[-2000:]}")

    def node_exporter_log(self) -> str:
        self.logs["node_exporter"].flush()
        return (self.root / "node_exporter.log").read_text()

    def api(self, path: str, **params) -> dict:
        """GET ``/api/v1/<path>`` -> its ``data`` (raises AssertionError on an error status)."""
        q = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{q}", timeout=30) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def alerts(self, name: str) -> list:
        """The active alerts (pending or firing) named ``name``: ``[{"labels", "annotations",
        "state", ...}]`` (/api/v1/alerts)."""
        return [a for a in self.api("alerts")["alerts"] if a["labels"].get("alertname") == name]

    def query(self, expr: str) -> list:
        """Instant query: the result vector (``[{"metric": {...}, "value": [t, "v"]}, ...]``)."""
        return self.api("query", query=expr)["result"]

    def wait(self, what: str, expr: str, timeout: float = 90, predicate=bool) -> list:
        """Poll ``expr`` until ``predicate(result)`` holds (the first scrape lands after ~7 s)."""
        seen = []

        def answered():
            try:
                got = self.query(expr)
            except OSError:  # not listening yet
                return None
            seen[:] = [got]
            return [got] if predicate(got) else None  # a list: an empty result may be what is awaited

        return wait_until(answered, timeout, 1, what,
                          lambda: f"{expr} -> {seen[0] if seen else 'no answer'} (logs in {self.root})")[0]
