"""The what-if chooser: models found by name and pool among the team's, ticked ones kept, and
"Plan these" planning them at once."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def test_the_chooser_searches_the_teams_models_by_name_and_pool(world):
    member = world.browser("member")
    nlp_model = world.objects[("InferenceModel", "nlp")]
    found = member.get("/models/what-if/", {"q": nlp_model.name}, **HTMX).content.decode()
    assert f'value="InferenceModel:{world.objects[("InferenceModel", "vision")].pk}"' in found
    assert f'value="InferenceModel:{nlp_model.pk}"' not in found  # another team's
    assert "No model matches." in member.get("/models/what-if/", {"q": "nomatch"}, **HTMX).content.decode()
    pool = world.objects[("InferenceModel", "vision")].node_pool
    by_pool = member.get("/models/what-if/", {"node_pool": pool}, **HTMX).content.decode()
    assert f'InferenceModel:{world.objects[("InferenceModel", "vision")].pk}' in by_pool
    picked = member.get("/models/what-if/", {"q": "nomatch", "pick": [f"InferenceModel:{nlp_model.pk}",
                        f"InferenceModel:{world.objects[('InferenceModel', 'vision')].pk}"]}, **HTMX).content.decode()
    assert picked.count('class="picked"') == 1  # the team's own pick stays; another team's is dropped
    assert "<html" in member.get("/models/what-if/").content.decode()  # without JavaScript: a page


def test_plan_these_plans_the_ticked_models_at_once(world):
    model = world.objects[("InferenceModel", "vision")]
    page = world.browser("member").get("/planning/", {"plan": "1", "pick": f"InferenceModel:{model.pk}",
                                                      "cluster": "east"}).content.decode()  # fmt: skip
    assert 'id="plan"' in page and model.name in page.split('id="plan"')[1]
    refused = world.browser("member").get(
        "/planning/", {"plan": "1", "pick": f"InferenceModel:{world.objects[('InferenceModel', 'nlp')].pk}"}
    ).content.decode()
    assert 'id="plan"' not in refused and "errorlist" in refused
