"""How a model's replicas are picked, as its write paths check it and the gateway reads it: the
annotations choosing the strategy and the scorers' weights are refused with field, value and rule
(``POST /api/apply/``, every write path's check), and a KubeAI Model's ``spec.loadBalancing`` is read
as KubeAI documents it (defaults 125, 256, 100). Names under ``localhost`` resolve to loopback in
the gateway's resolver (RFC 6761) and are refused like loopback outside development."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from django.conf import settings

from inference_gateway.picking.bounded_hash import PrefixHashSpec
from inference_gateway.picking.config import LEAST_LOAD, PREFIX_HASH, RANDOM, config_of
from inference_gateway.picking.scorers import Weights
from inference_gateway.resolver import GuardedResolver, RefusedAddress
from tests.api.test_apply import post_yaml

PICKER = "inference-portal.io/endpoint-picker"
WEIGHTS = "inference-portal.io/scorer-weights"


def mistral(annotations: dict[str, str]) -> str:
    manifest = yaml.safe_load((Path(settings.SAMPLES_DIR) / "inferencemodel-mistral-7b.yaml").read_text())
    manifest["metadata"]["annotations"] = annotations
    return yaml.safe_dump(manifest)


def test_bad_picking_annotations_are_refused_with_field_value_and_rule(editor, cluster) -> None:
    response = post_yaml(editor, mistral({PICKER: "fastest", WEIGHTS: "prefix=3,speed=2"}))
    assert response.status_code == 400
    shown = str(response.json())
    assert f"metadata.annotations[{PICKER}]" in shown and "fastest" in shown
    assert "must be one of scorer, least-load, random" in shown
    assert f"metadata.annotations[{WEIGHTS}]" in shown and "the scorer must be one of prefix, queue, kv, lora" in shown
    assert "must be from 0 to 100" in str(post_yaml(editor, mistral({WEIGHTS: "kv=1000"})).json())

    accepted = post_yaml(editor, mistral({PICKER: "least-load", WEIGHTS: "prefix=5, kv=1"}))
    assert accepted.status_code == 200, accepted.json()


def test_the_gateway_reads_the_strategy_and_weights_of_each_kind() -> None:
    assert config_of("InferenceModel", {}, {PICKER: "random"}).strategy == RANDOM
    assert config_of("ModelService", {}, {WEIGHTS: "prefix=5,kv=1"}).weights == Weights(prefix=5, kv=1)
    kubeai = config_of("Model", {"loadBalancing": {"strategy": "PrefixHash", "prefixHash": {"replication": 8}},
                                 "adapters": [{"name": "sql", "url": "hf://a/b"}]}, {PICKER: "random"})
    assert (kubeai.strategy, kubeai.prefix_hash, kubeai.adapters) == (
        PREFIX_HASH, PrefixHashSpec(125, 8, 100), frozenset({"sql"}))  # KubeAI's own field decides
    assert config_of("Model", {}, {}).strategy == LEAST_LOAD  # KubeAI's default
    assert kubeai.serves("Model", "sql") and not kubeai.serves("Model", "chat")


@pytest.mark.parametrize("allowed", [True, False])
def test_names_under_localhost_resolve_to_loopback_refused_outside_development(settings, allowed) -> None:
    settings.GATEWAY_ALLOW_LOOPBACK = allowed

    async def resolve() -> list:
        resolver = GuardedResolver()
        try:
            return await resolver.resolve("engine-0.localhost", 8000)
        finally:
            await resolver.close()

    if allowed:
        assert [result["host"] for result in asyncio.run(resolve())] == ["127.0.0.1"]
    else:
        with pytest.raises(RefusedAddress, match=r"engine-0\.localhost resolves to 127\.0\.0\.1"):
            asyncio.run(resolve())
