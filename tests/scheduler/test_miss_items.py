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
