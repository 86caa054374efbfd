"""The holders pool accounts list come from a planned cluster's kept holdings
(scheduler.holdings_cache.ClusterHoldings.biggest_running) only as the same holders, in the same
order, as the SQL path reads (scheduler.holdings.biggest_per_pool): ties in memory broken by
namespace and name in code point order, a model that declares no memory after one that declares
0, stopped models left out, every kind ranked on its own, whether an unreported model runs decided
by the cluster's managed kinds."""

from __future__ import annotations

from itertools import groupby

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster
from models_app.models import InferenceModel, ModelService
from scheduler.admission.accounting import HOLDERS_SHOWN, PoolAccount, _pool_figures, pool_accounts
from scheduler.holdings import Holding, controlled_pairs, holder_rank, load_holdings
from scheduler.holdings_cache import cluster_holdings, managed_kinds_and_kept
from tests.scheduler.conftest import make_model, make_pool
from tests.scheduler.test_pool_totals import kubeai, service

# names whose code point order ("-" < "." < digits < letters) is not a natural language's
NAMES = ["a-b", "a.b", "ab", "a0", "b-1", "b1", "b.1", "c", "c-c", "cc", "d"]


def crowded(cluster: Cluster) -> None:
    """Two pools of more than ten running models of two kinds, ranked through ties (40Gi, 8Gi),
    0 and NULL memory at the cut; stopped and unreported ones; a third kind in a pool of its own."""
    for pool in ("gpu", "l4"):
        make_pool(cluster, pool, budget="10Ti")
        for index, name in enumerate(NAMES):
            namespace = "team-a" if index % 2 else "team.b"
            make_model(cluster, f"{pool}{name}-40", "40Gi", pool=pool, namespace=namespace)
            make_model(cluster, f"{pool}{name}-8", "8Gi", pool=pool, namespace="team-a" if index % 3 else "team.b")
            make_model(cluster, f"{pool}{name}-zero", "0", pool=pool)
            make_model(cluster, f"{pool}{name}-none", "1Gi", pool=pool)
        make_model(cluster, f"{pool}-stopped", "80Gi", pool=pool, replicas=0)
        make_model(cluster, f"{pool}-unreported", "80Gi", pool=pool, replicas=None)
        for index in range(12):
            service(cluster, f"svc-{index % 3}{pool}{NAMES[index % len(NAMES)]}", pool, decode=index % 4,
                    memory=f"{index % 2 + 1}Gi")  # fmt: skip
    for index in range(3):
        kubeai(cluster, f"ai-{index}", "gpu-l4", replicas=index)  # (the sample's pool)
    InferenceModel.objects.filter(cluster=cluster, name__endswith="-none").update(memory_bytes=None)
    ModelService.objects.filter(cluster=cluster, name__startswith="svc-0").update(memory_bytes=None)


def by_pool_and_kind(holdings: list[Holding]) -> dict[tuple[str, str], list[Holding]]:
    """The SQL path's holdings as it reads them: each (pool, kind)'s list in the order read."""
    keyed = sorted(enumerate(holdings), key=lambda pair: (pair[1].pool, pair[1].kind, pair[0]))
    return {key: [h for _, h in group] for key, group in groupby(keyed, key=lambda p: (p[1].pool, p[1].kind))}


@pytest.fixture
def managed(db) -> Cluster:
    return Cluster.objects.create(name="managed", server_url="https://10.0.0.9:6443", managed_kinds=["InferenceModel"])


@pytest.mark.parametrize("which", ["cluster", "managed"])
def test_kept_holders_are_the_sql_holders_in_the_sql_order(which, request):
    planned: Cluster = request.getfixturevalue(which)
    crowded(planned)
    kept = cluster_holdings(planned.pk)  # as a plan keeps them
    ranked = kept.running_ranked
    # the fixture ranks through ties, and NULL after 0, at the cut
    cut = ranked[("gpu", "InferenceModel")][HOLDERS_SHOWN - 1 : HOLDERS_SHOWN + 1]
    assert cut[0].memory_bytes == cut[1].memory_bytes
    tail = ranked[("gpu", "InferenceModel")][-2 * len(NAMES) :]
    assert [h.declares_memory for h in tail] == [True] * len(NAMES) + [False] * len(NAMES)
    assert {h.memory_bytes for h in tail} == {0}

    for per_pool in (1, 3, HOLDERS_SHOWN, 2 * len(NAMES) + 1):
        in_sql = load_holdings(planned.pk, running_only=True, per_pool=per_pool)
        assert by_pool_and_kind(in_sql) == {key: list(ranked[key][:per_pool]) for key in ranked}
        assert sorted(kept.biggest_running(per_pool), key=holder_rank) == sorted(in_sql, key=holder_rank)
    # every running model (in no order: pool_accounts sorts them)
    every = load_holdings(planned.pk, running_only=True)
    assert sorted(kept.biggest_running(None), key=holder_rank) == sorted(every, key=holder_rank)


def accounts(cluster: Cluster) -> list[PoolAccount]:
    return pool_accounts(cluster.pk, per_pool=HOLDERS_SHOWN)


@pytest.mark.parametrize("which", ["cluster", "managed"])
def test_pool_accounts_from_kept_holdings_equal_those_read_in_sql(which, request):
    planned: Cluster = request.getfixturevalue(which)
    crowded(planned)
    assert managed_kinds_and_kept(planned.pk)[1] is None  # no plan yet: read in SQL
    in_sql = accounts(planned)
    kept = cluster_holdings(planned.pk)
    assert managed_kinds_and_kept(planned.pk)[1] is kept
    from_kept = accounts(planned)

    assert from_kept == in_sql
    # per kind: ten InferenceModels and nine running ModelServices; two running KubeAI Models
    assert [(account.pool, len(account.holders)) for account in from_kept] == [("gpu", 19), ("gpu-l4", 2), ("l4", 19)]
    assert all(any(holder is h for h in kept.running) for account in from_kept for holder in account.holders)
    # a write moves the generation: the kept holdings are not used until a plan reads them again
    InferenceModel.objects.filter(cluster=planned, name="gpud-40").update(memory_bytes=None)
    assert managed_kinds_and_kept(planned.pk)[1] is None
    moved = accounts(planned)
    assert moved != in_sql
    cluster_holdings(planned.pk)
    assert accounts(planned) == moved


def team_a_rows(rows):
    return rows.filter(namespace="team-a")


def team_a_sees(cluster_id: int, namespace: str) -> bool:
    return namespace == "team-a"


@pytest.mark.parametrize("which", ["cluster", "managed"])
def test_a_members_accounts_from_kept_holdings_equal_those_read_in_sql(which, request):
    """A team member's rows (``restrict`` in SQL, ``visible`` its predicate) come from the planned
    cluster's kept holdings as staff's do: the same holders, figures and pools as the scans give,
    the other teams' models counted, not shown; without kept holdings they are read in SQL."""
    planned: Cluster = request.getfixturevalue(which)
    crowded(planned)
    for namespace in ("team-a", "team.b"):  # observed peaks and right-sizing advice, visible and not
        make_model(planned, f"peaked-{namespace}", "80Gi", pool="gpu", namespace=namespace, peak="40Gi")
        make_model(planned, f"stopped-{namespace}", "8Gi", pool="stopped-pool", namespace=namespace, replicas=0)
    in_sql = pool_accounts(planned.pk, restrict=team_a_rows, per_pool=3, visible=team_a_sees)  # nothing kept yet
    assert managed_kinds_and_kept(planned.pk)[1] is None
    cluster_holdings(planned.pk)
    with CaptureQueriesContext(connection) as queries:
        from_kept = pool_accounts(planned.pk, restrict=team_a_rows, per_pool=3, visible=team_a_sees)
    assert from_kept == in_sql
    shown = [holder for account in from_kept for holder in account.holders]
    assert shown and {holder.namespace for holder in shown} == {"team-a"}
    gpu = next(account for account in from_kept if account.pool == "gpu")
    assert gpu.other_team_holders and gpu.observed_bytes and gpu.rightsizing_savings_bytes
    assert "stopped-pool" in {account.pool for account in from_kept}
    model_table = InferenceModel._meta.db_table
    assert not [query for query in queries.captured_queries if f'FROM "{model_table}"' in query["sql"]]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the generation is PostgreSQL's")
def test_one_clusters_accounts_read_its_managed_kinds_with_its_generation(cluster, managed):
    """Whether an unreported model runs depends on its cluster's managed kinds: one cluster's
    accounts take them from the read of its generation (which also finds its kept holdings),
    not from a read of every cluster's; the figures are those every cluster's pairs give."""
    for planned in (cluster, managed):
        crowded(planned)
        cluster_holdings(planned.pk)
        with CaptureQueriesContext(connection) as queries:
            accounts(planned)
        every_clusters = f'SELECT "{Cluster._meta.db_table}"."id" AS "pk", "{Cluster._meta.db_table}"."managed_kinds"'
        assert not [query for query in queries.captured_queries if query["sql"].startswith(every_clusters)]
        own = controlled_pairs([(planned.pk, planned.managed_kinds)])
        assert _pool_figures(planned.pk, None, None, own) == _pool_figures(planned.pk, None, None, controlled_pairs())
    assert controlled_pairs([(managed.pk, managed.managed_kinds)]) == {(managed.pk, "InferenceModel")}
