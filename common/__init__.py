"""What every part of the project may use and that knows none of it: the bottom of the layers.

Process plumbing and small tools with no domain in them: the garbage collector's tuning
(``gc_tuning``), child processes that die with their parent (``child_processes``), OpenTelemetry
set-up (``tracing``), a least-recently-used map (``lru``), the server-side chart style (``charts``),
Go duration strings (``durations``), and the gateway process's database thread and metrics registry
that its hooks share (``db_thread``, ``gateway_metrics``). It imports no package of the project
(tests/test_architecture.py): an entry point in ``config/`` or an app may call it, never the reverse.
"""
