"""A small client for Prometheus' HTTP query API (``/api/v1/query``), over ``requests``.

Only instant queries are needed: every right-sizing figure is a ``*_over_time`` over the window,
evaluated once at the refresh time. The client counts its requests so batching can be checked
and benchmarked. Errors say which Prometheus failed and how, never the auth header nor credentials
inside the URL (they reach team users through the report and the log).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import requests

from clusters.url_rules import redact_url


class PrometheusError(Exception):
    """Prometheus could not answer: unreachable, timed out, or refused the query."""


@dataclass(frozen=True)
class Sample:
    labels: dict[str, str]
    value: float


class PrometheusClient:
    """Instant queries against one Prometheus. One instance per refresh (a ``requests.Session``)."""

    def __init__(self, base_url: str, auth_header: str = "", timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.shown_url = redact_url(self.base_url)
        self.timeout = timeout
        self.session = requests.Session()
        if auth_header:
            self.session.headers["Authorization"] = auth_header
        self.requests_made = 0

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def query(self, promql: str, at: datetime) -> list[Sample]:
        """Evaluate ``promql`` at ``at``; the instant vector as samples (NaN values dropped)."""
        data = self.post("query", {"query": promql, "time": f"{at.timestamp():.3f}"})
        if data.get("resultType") != "vector":
            raise PrometheusError(f"Prometheus at {self.shown_url} returned a {data.get('resultType')}, not a vector")
        samples = []
        for item in data.get("result") or []:
            value = float(item["value"][1])
            if value == value:  # drop NaN
                samples.append(Sample(item.get("metric") or {}, value))
        return samples

    def post(self, endpoint: str, form: dict[str, str]) -> dict[str, Any]:
        """``/api/v1/<endpoint>`` with ``form``; the answer's ``data``, or PrometheusError saying why not."""
        self.requests_made += 1
        url = f"{self.base_url}/api/v1/{endpoint}"
        try:
            # POST: batched queries are long, and Prometheus takes form-encoded POSTs for queries.
            response = self.session.post(url, data=form, timeout=self.timeout)
        except requests.Timeout:
            raise PrometheusError(f"Prometheus at {self.shown_url} did not answer within {self.timeout:g} s") from None
        except requests.RequestException as error:
            raise PrometheusError(f"Prometheus at {self.shown_url} is unreachable ({type(error).__name__})") from None
        body = _json(response)
        if response.status_code != 200 or body.get("status") != "success":
            detail = body.get("error") or response.reason or "no message"
            raise PrometheusError(f"Prometheus at {self.shown_url} answered {response.status_code}: {detail}")
        return body.get("data") or {}


def _json(response: requests.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
