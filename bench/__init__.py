"""Benchmarks run by ``make bench``: each ``bench_*.py`` module exposes ``run() -> dict[str, float]``."""
