"""What the gateway reads beside each route, and before its first whole read: a worker that has not
yet read its whole catalog answers a request from the rows its ``model`` may name (``load_named``)
exactly as the whole table would (the same route, the same ambiguity and conflict refusals); the
picking settings travel in the route as the catalog reads the row (a changed annotation arrives
with the row's notice, no read of its own); the replica tables are written in two statements
whatever the number of models. Against real PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster
from common.db_thread import close_reads
from inference_gateway.catalog import CATALOG_READS, AmbiguousModel, Catalog, ConflictingId, load_routes, read_rows
from inference_gateway.models import ReplicaSnapshot
from inference_gateway.picking import snapshot
from inference_gateway.picking.config import LEAST_LOAD, PICKER_ANNOTATION, PREFIX_HASH, RANDOM, SCORER
from inference_gateway.picking.scorers import Weights
from models_app.models import InferenceModel, KubeAIModel
from tests.gateway.conftest import serve_model

pytestmark = pytest.mark.django_db(transaction=True)
NAMES = ("llama", "team-a/llama", "team-b/llama", "team-a/mistral", "mistral", "gemma", "team-a/gemma", "shared",
         "team-a/shared", "missing", "team-c/llama", "team-a/")


@pytest.fixture
def catalog_threads():
    """The catalog's reads run in its threads, as in the gateway: their connections closed after."""
    yield
    asyncio.run(close_reads())
    asyncio.run(close_reads(CATALOG_READS))


def outcome(catalog: Catalog, name: str, visible) -> tuple:
    """What ``find`` answers: the route's object, or the refusal's type and message."""
    async def find() -> tuple:
        try:
            route = await catalog.find(name, visible)
        except (AmbiguousModel, ConflictingId) as error:
            return type(error).__name__, str(error)
        finally:
            await catalog.routes()  # the whole read ``find`` started, done before the loop closes
        return None if route is None else (route.kind, route.cluster_id, route.namespace, route.name)
    return asyncio.run(find())


def test_before_the_whole_read_a_model_is_found_as_the_whole_table_would(cluster, catalog_threads) -> None:
    other = Cluster.objects.create(name="other", auth_method=Cluster.AuthMethod.SNAPSHOT)
    serve_model(cluster, "llama", "http://127.0.0.1:9001")
    serve_model(cluster, "llama", "http://127.0.0.1:9002", namespace="team-b")
    serve_model(cluster, "mistral", "http://127.0.0.1:9003")
    serve_model(other, "mistral", "http://127.0.0.1:9004")  # the same id from two clusters: a conflict
    serve_model(cluster, "shared", "http://127.0.0.1:9005")
    KubeAIModel.objects.create(cluster=cluster, namespace="team-a", name="gemma", sync_state="Synced",
                               spec={"url": "hf://google/gemma-2-2b", "engine": "OLlama",
                                     "features": ["TextGeneration"], "resourceProfile": "cpu:1"})
    whole = Catalog(3600)
    asyncio.run(whole.routes())
    for visible in (lambda _cluster, _namespace: True, lambda _cluster, namespace: namespace == "team-a"):
        for name in NAMES:
            expected = outcome(whole, name, visible)
            assert outcome(Catalog(3600), name, visible) == expected, name
    assert outcome(whole, "llama", lambda *_: True)[0] == "AmbiguousModel"
    assert outcome(whole, "team-a/mistral", lambda *_: True)[0] == "ConflictingId"
    assert outcome(whole, "gemma", lambda *_: True) == ("Model", cluster.pk, "team-a", "gemma")


def test_the_route_carries_its_picking_settings_and_a_changed_row_brings_new_ones(cluster) -> None:
    plain = serve_model(cluster, "plain", "http://127.0.0.1:9001")
    annotated = serve_model(cluster, "annotated", "http://127.0.0.1:9002")
    annotated.annotations = {PICKER_ANNOTATION: "random", "inference-portal.io/scorer-weights": "prefix=5,kv=1"}
    annotated.save()
    kubeai = KubeAIModel.objects.create(
        cluster=cluster, namespace="team-a", name="gemma", sync_state="Synced",
        spec={"url": "hf://google/gemma-2-2b", "engine": "VLLM", "features": ["TextGeneration"],
              "resourceProfile": "cpu:1", "adapters": [{"name": "sql", "url": "hf://a/b"}],
              "loadBalancing": {"strategy": "PrefixHash", "prefixHash": {"replication": 8}}})
    state = load_routes()
    route = {model: routes[0] for model, routes in state.table.by_id.items()}
    assert route["team-a/plain"].picking.strategy == SCORER
    assert (route["team-a/annotated"].picking.strategy, route["team-a/annotated"].picking.weights) == (
        RANDOM, Weights(prefix=5, kv=1))
    gemma = route["team-a/gemma"].picking
    assert (gemma.strategy, gemma.prefix_hash.replication, gemma.adapters) == (PREFIX_HASH, 8, frozenset({"sql"}))

    plain.annotations = {PICKER_ANNOTATION: "least-load"}
    plain.save()
    KubeAIModel.objects.filter(pk=kubeai.pk).update(spec={**kubeai.spec, "loadBalancing": {"strategy": "LeastLoad"}})
    changes = read_rows(state, {InferenceModel._meta.db_table: {plain.pk}, KubeAIModel._meta.db_table: {kubeai.pk}})
    assert changes[(InferenceModel._meta.db_table, plain.pk)][1].picking.strategy == LEAST_LOAD
    assert changes[(KubeAIModel._meta.db_table, kubeai.pk)][1].picking.strategy == LEAST_LOAD


def statements(queries: CaptureQueriesContext) -> list[str]:
    """The statements run, the transaction's BEGIN and COMMIT left out."""
    return [query["sql"] for query in queries if query["sql"] not in ("BEGIN", "COMMIT")]


def test_replica_tables_of_a_thousand_models_are_written_in_two_statements(cluster) -> None:
    rows = [{"replica": "10.0.0.1:8000", "picks": {"queue": 1}, "fresh": False}]
    tables = {("InferenceModel", cluster.pk, "team-a", f"model-{index}"): rows for index in range(1000)}
    with CaptureQueriesContext(connection) as queries:
        snapshot._write(tables)
    assert [sql.split()[0] for sql in statements(queries)] == ["INSERT", "DELETE"], statements(queries)
    assert ReplicaSnapshot.objects.filter(worker=snapshot.worker_name()).count() == 1000

    kept = dict(list(tables.items())[:10])
    kept[("InferenceModel", cluster.pk, "team-a", "model-0")] = [{**rows[0], "picks": {"queue": 7}}]
    with CaptureQueriesContext(connection) as queries:
        snapshot._write(kept)
    assert [sql.split()[0] for sql in statements(queries)] == ["INSERT", "DELETE"]
    written = ReplicaSnapshot.objects.filter(worker=snapshot.worker_name())
    assert sorted(written.values_list("name", flat=True)) == sorted(name for *_, name in kept)
    assert written.get(name="model-0").replicas[0]["picks"] == {"queue": 7}
