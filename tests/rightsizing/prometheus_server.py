"""A real Prometheus for tests and benchmarks, serving history backfilled with promtool.

History is written as OpenMetrics text with timestamps, turned into TSDB blocks with
``promtool tsdb create-blocks-from openmetrics`` (one block up to 7 days: far faster than the
2-hour default), and served by ``prometheus`` on a free loopback port.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import requests

from devstack.ports import free_port

GI = 1024**3
MI = 1024**2


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))


class History:
    """OpenMetrics families built up series by series; samples of a family must be contiguous."""

    def __init__(self) -> None:
        self.families: dict[str, list[str]] = {}

    def add(self, metric: str, labels: dict[str, str], points: Iterable[tuple[int, float]]) -> None:
        lines = self.families.setdefault(metric, [])
        prefix = f"{metric}{{{_labels(labels)}}} "
        lines.extend(f"{prefix}{value:.17g} {timestamp}\n" for timestamp, value in points)

    def write(self, path: Path) -> None:
        with path.open("w") as handle:
            for metric, lines in self.families.items():
                handle.write(f"# TYPE {metric} gauge\n")
                handle.writelines(lines)
            handle.write("# EOF\n")



class PrometheusServer:
    """``prometheus`` over a backfilled TSDB in a temporary directory; ``stop()`` removes both."""

    def __init__(self, history: History, ready_timeout: float = 60.0) -> None:
        for binary in ("prometheus", "promtool"):
            if not shutil.which(binary):
                raise RuntimeError(f"{binary} not found: install the Debian package (.ci/setup.d/prometheus.sh)")
        self.directory = Path(tempfile.mkdtemp(prefix="rightsizing-prom-"))
        data = self.directory / "data.om"
        history.write(data)
        self.backfill_started = time.perf_counter()
        subprocess.run(
            [
                "promtool",
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                "--max-block-duration=168h",
                "--quiet",
                str(data),
                str(self.directory / "tsdb"),
            ],
            check=True,
            capture_output=True,
        )
        self.backfill_seconds = time.perf_counter() - self.backfill_started
        data.unlink()
        config = self.directory / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (self.directory / "prometheus.log").open("w")
        self.process = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={self.directory / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=30d",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready(ready_timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {(self.directory / 'prometheus.log').read_text()[-2000:]}")
            try:
                if requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise RuntimeError("prometheus did not become ready")

    def query_requests_served(self) -> int:
        """How many /api/v1/query requests Prometheus has answered, from its own counter."""
        text = requests.get(f"{self.url}/metrics", timeout=5).text
        total = 0.0
        for line in text.splitlines():
            if line.startswith("prometheus_http_requests_total{") and 'handler="/api/v1/query"' in line:
                total += float(line.rsplit(" ", 1)[1])
        return int(total)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def minutes(end: int, count: int, step: int = 60) -> Iterator[int]:
    """``count`` timestamps ``step`` seconds apart, the last at ``end``."""
    return iter(range(end - (count - 1) * step, end + 1, step))
