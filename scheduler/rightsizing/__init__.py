"""Right-sizing from real metrics: how much memory a running model should ask for, by what it used.

Decides, from each cluster's Prometheus (observed peaks, GPU framebuffer, KV cache), every serving
model's utilization, its recommendation and whether to write it back to the model (docs/rightsizing.md);
its own Django app (label ``rightsizing``), so its tables and migrations stay apart. Its GPU policy
reads the calculator's engine allowances and GPU types (``scheduler.calculator``); it must not import
``scheduler.planning`` nor ``scheduler.admission``: they take its numbers through the
``scheduler.savings.Recommender`` plug, never by import. tests/test_architecture.py holds it to that.
"""
