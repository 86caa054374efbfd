"""Who may have how much: memory admission, team quotas and the pools' books.

Decides whether a model (and its dependencies) may start now against its pool's budget and its
team's quota (``admit``: ``admit``/``release`` for the controllers), each team's guaranteed share and
borrowing (``quotas``), and each pool's budget, allocation, reservation and observed use, in full
(``accounting``) or as the totals PostgreSQL keeps (``usage``). It reads ``scheduler``'s shared
records (holdings, pool totals, models); it must not import ``scheduler.planning`` (a plan asks
admission's questions, never the reverse), ``scheduler.calculator`` nor ``scheduler.rightsizing``.
tests/test_architecture.py holds it to that.
"""
