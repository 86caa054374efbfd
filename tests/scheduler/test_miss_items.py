"""The plan page's list of pods that found no node, joined in Python, escaped as the template did."""

from __future__ import annotations

from django.template import Context, Template

from scheduler.templatetags.misses import miss_items


def test_each_miss_is_one_escaped_item_and_a_hidden_detail_leaves_no_colon():
    misses = [
        {"model": "InferenceModel a/<b>", "reason": "no room", "detail": "memory: needs 8.0Gi & more"},
        {"model": "another team's model", "reason": "over budget", "detail": None},
    ]
    html = str(miss_items(misses))
    assert html == (
        "<li>InferenceModel a/&lt;b&gt; — no room: memory: needs 8.0Gi &amp; more</li>"
        "<li>another team&#x27;s model — over budget</li>"
    )
    written_out = Template(
        "{% for miss in misses %}<li>{{ miss.model }} — {{ miss.reason }}"
        "{% if miss.detail %}: {{ miss.detail }}{% endif %}</li>{% endfor %}"
    ).render(Context({"misses": misses}))
    assert html == written_out


def test_the_proposal_is_always_listed_and_running_misses_are_capped_with_a_count():
    running = [{"model": f"m{index}", "origin": "running", "reason": "no room", "detail": None} for index in range(60)]
    proposal = {"model": "mine", "origin": "new", "reason": "no room", "detail": "memory"}
    html = str(miss_items([*running, proposal]))
    assert html.startswith("<li>mine — no room: memory</li><li>m0 — no room</li>")
    assert html.count("<li>") == 1 + 50 + 1 and "m49 —" in html and "m50 —" not in html
    assert html.endswith("<li>… and 10 more running models that find no node (the plan API lists all)</li>")
