"""Every list page with filters answers an empty page, not an error, when a filter matches nothing.

Each page is asked once per text filter it has (a value no row carries), alone and with another
filter that does match, since an empty page used to fail only where the rows of several kinds
are merged (the catalog's union).
"""

from __future__ import annotations

import django_filters
import pytest

from fleet.filtersets import AuditEntryFilterSet
from models_app.catalog import FILTERSETS
from runs_app.filtersets import InferenceConfigFilterSet, InferenceRunFilterSet
from scheduler.rightsizing.filters import FILTERS as REPORT_FILTERS

pytestmark = pytest.mark.django_db
NOTHING = "no-such-value-zz"


def text_filters(*filtersets: type) -> list[str]:
    """The free-text filters of the FilterSets: the ones a user can give any value."""
    return sorted({
        name for filterset in filtersets for name, field in filterset.base_filters.items()
        if isinstance(field, django_filters.CharFilter)
    })  # fmt: skip


PAGES = [
    ("/models/", text_filters(*(filterset for _, filterset in FILTERSETS.values())), "No model matches."),
    ("/runs/", text_filters(InferenceRunFilterSet), "No run."),
    ("/configs/", text_filters(InferenceConfigFilterSet), "No InferenceConfig."),
    ("/fleet/pods/", ["q", "namespace", "cluster"], "No pods match these filters."),
    ("/fleet/events/", ["q", "namespace", "cluster"], "No events match these filters."),
    ("/audit/", text_filters(AuditEntryFilterSet), "No changes match these filters."),
    ("/rightsizing/", [key for key in REPORT_FILTERS if key not in ("state", "ordering")], "No observations match"),
]
CASES = [(path, key, empty) for path, keys, empty in PAGES for key in keys]


@pytest.mark.parametrize(("path", "key", "empty"), CASES, ids=[f"{path}?{key}" for path, key, _ in CASES])
def test_a_filter_that_matches_nothing_gives_an_empty_page(world, path, key, empty):
    browser = world.browser("staff")
    for params in ({key: NOTHING}, {key: NOTHING, "namespace" if key != "namespace" else "cluster": "vision"}):
        response = browser.get(path, params)
        assert response.status_code == 200, (params, response.content.decode()[:2000])
        assert empty in response.content.decode(), params
