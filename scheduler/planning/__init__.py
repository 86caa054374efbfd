"""Where models go: placement, what-if plans, proposals and the planning page's parts.

Decides on which pool and node each pod of a proposed or running model goes (``placement``: pure
first-fit-decreasing, no ORM; ``inputs``: what placement is given, read from the rows), what a
what-if plan answers (``planner``, with the running models' placement kept between plans in
``baseline`` and its long lists in pages in ``pages``), how a user's proposal becomes plain records
(``proposals``), what of a plan a team may see (``visibility``) and the planning charts
(``charts``). It asks ``scheduler.admission`` whether a plan breaks a team quota and reads the
pools' books there; it must not import ``scheduler.calculator`` nor ``scheduler.rightsizing``.
tests/test_architecture.py holds it to that.
"""
