"""``POST /api/apply/``: like ``kubectl apply -f`` for every mirrored kind, all or nothing.

A document that names ``metadata.resourceVersion`` was made from that version of the portal's
object: if the object changed since, nothing is written and the answer is 409 naming the
document and the differences. A document without one states the whole object, as a file
under version control does, and replaces the portal's intent.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.public import ADD, CHANGE, can_act_in, grants_of, is_unrestricted, unreadable_references
from clusters.kinds import all_models
from clusters.models import AuditEntry, Cluster, KubeObject, SyncState
from clusters.sync.audit import Actor
from clusters.validation.manifests import resolve_kind, validate_manifest
from clusters.validation.schemas import ManifestInvalid
from clusters.web.api.exceptions import field_error_detail
from clusters.web.api.parsers import JSONParser, PlainTextYAMLParser, TextYAMLParser, YAMLParser
from clusters.web.api.views import CLUSTER_PARAMETER
from clusters.web.edits import EditRefused
from clusters.web.services import assign_manifest, resolve_cluster, save_portal_edit


def _documents(data: Any) -> list[Any]:
    """Manifests from a list, a single manifest, or ``kind: List`` documents (``kubectl get -o yaml``)."""
    documents: list[Any] = []
    for document in data if isinstance(data, list) else [data]:
        if isinstance(document, dict) and document.get("kind") == "List" and isinstance(document.get("items"), list):
            documents.extend(document["items"])
        else:
            documents.append(document)
    return documents


class DocumentRefused(Exception):
    """One document's edit was refused (:class:`clusters.web.edits.EditRefused`): the whole apply is undone."""

    def __init__(self, failure: dict[str, Any]) -> None:
        self.failure = failure
        super().__init__(failure["detail"])


class ApplyResultSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    kind = serializers.CharField()
    namespace = serializers.CharField()
    name = serializers.CharField()
    action = serializers.ChoiceField(choices=["created", "updated", "unchanged"])
    id = serializers.IntegerField()


class ApplyView(APIView):
    """Create or update each manifest; if any document is invalid nothing is written."""

    parser_classes = [JSONParser, YAMLParser, TextYAMLParser, PlainTextYAMLParser]
    permission_classes = [IsAuthenticated]

    @extend_schema(
        parameters=[CLUSTER_PARAMETER],
        request={
            "application/json": {"type": "array", "items": {"type": "object"}},
            "application/yaml": {"type": "string"},
        },
        responses={
            200: ApplyResultSerializer(many=True),
            400: OpenApiResponse(description="Per-document errors: {documents: [{index, errors}]}"),
            403: OpenApiResponse(description="Every failing document targets a namespace outside your teams'"),
            409: OpenApiResponse(
                description="A document's object changed since its metadata.resourceVersion, "
                "or is being deleted: {documents: [{index, errors, fields...}]}"
            ),
        },
    )
    def post(self, request):
        if not _may_write_some_kind(request.user):  # before the body is even read
            raise PermissionDenied("you need the add and change permissions of at least one mirrored kind")
        try:
            cluster = resolve_cluster(request.query_params.get("cluster"))
        except ManifestInvalid as invalid:
            return Response(field_error_detail(invalid.errors), status=status.HTTP_400_BAD_REQUEST)
        documents = _documents(request.data)
        if not documents:
            return Response({"documents": ["no manifest in the request body"]}, status=status.HTTP_400_BAD_REQUEST)
        # Authorization first, as the API server does: a refused writer causes no validation work.
        authorized, failures = self._authorize_all(request, cluster, documents)
        planned = []
        if not any(failure["forbidden"] for failure in failures):
            planned, invalid = self._validate_all(request, cluster, authorized)
            failures = sorted([*failures, *invalid], key=lambda failure: failure["index"])
        if failures:
            forbidden = all([failure.pop("forbidden") for failure in failures])  # pop from every failure
            code = status.HTTP_403_FORBIDDEN if forbidden else status.HTTP_400_BAD_REQUEST
            return Response({"documents": failures}, status=code)
        actor = Actor.from_request(request, AuditEntry.Source.API)
        try:
            with transaction.atomic():
                results = [self._write(index, cluster, model, manifest, actor) for index, model, manifest in planned]
        except DocumentRefused as refused:
            return Response({"documents": [refused.failure]}, status=status.HTTP_409_CONFLICT)
        return Response(results)

    def _authorize_all(self, request, cluster: Cluster, documents: list[Any]):
        """Each document's kind, permission and namespace, read from the document as given."""
        authorized, failures = [], []
        for index, document in enumerate(documents):
            try:
                model = resolve_kind(document)
            except ManifestInvalid as invalid:
                failures.append(_failure(index, document, field_error_detail(invalid.errors)))
                continue
            needed = [model.permission(action) for action in ("add", "change")]
            if not request.user.has_perms(needed):
                failures.append(_failure(index, document, {"permission": [f"you need {' and '.join(needed)}"]}, 403))
                continue
            metadata = document.get("metadata")
            namespace = (metadata.get("namespace") if isinstance(metadata, dict) else None) or "default"
            if isinstance(namespace, str) and not all(
                can_act_in(request.user, cluster.pk, namespace, action) for action in (ADD, CHANGE)
            ):
                rule = f"{namespace!r} in cluster {cluster.name} is not a namespace your teams may write in"
                failures.append(_failure(index, document, {"metadata.namespace": [f"metadata.namespace: {rule}"]}, 403))
                continue
            authorized.append((index, model, document))
        return authorized, failures

    def _validate_all(self, request, cluster: Cluster, authorized: list[tuple[int, type[KubeObject], Any]]):
        planned, failures = [], []
        for index, model, document in authorized:
            try:
                manifest = validate_manifest(model, document, cluster)
            except ManifestInvalid as invalid:
                failures.append(_failure(index, document, field_error_detail(invalid.errors)))
                continue
            refused = unreadable_references(request.user, cluster.pk, model, manifest)
            if refused:
                failures.append(_failure(index, document, refused, 403))
                continue
            planned.append((index, model, manifest))
        return planned, failures

    def _write(self, index: int, cluster: Cluster, model: type[KubeObject], manifest: dict[str, Any], actor: Actor):
        metadata = manifest["metadata"]
        obj = (
            model.objects.select_for_update()
            .filter(cluster=cluster, namespace=metadata["namespace"], name=metadata["name"])
            .first()
        )
        action = "created" if obj is None else "updated"
        if obj is None:
            obj = model(cluster=cluster)
        before = obj.to_manifest() if obj.pk else None
        assign_manifest(obj, manifest)
        if before is not None and before == obj.to_manifest() and obj.sync_state == SyncState.SYNCED:
            action = "unchanged"
        else:
            try:
                save_portal_edit(obj, actor, made_from=metadata.get("resourceVersion") if before else None)
            except EditRefused as refused:
                raise DocumentRefused(
                    {
                        "index": index,
                        "kind": model.kube.kind,
                        "name": obj.name,
                        "errors": field_error_detail(refused.errors),
                        **refused.as_dict(),
                    }
                ) from None
        return {
            "index": index,
            "kind": model.kube.kind,
            "namespace": obj.namespace,
            "name": obj.name,
            "action": action,
            "id": obj.pk,
        }


def _may_write_some_kind(user: Any) -> bool:
    """Whether any document could be accepted from ``user``: some kind's add and change permissions
    and some namespace to write in."""
    return any(user.has_perms([model.permission("add"), model.permission("change")]) for model in all_models()) and (
        is_unrestricted(user) or bool(grants_of(user, ADD))
    )


def _failure(index: int, document: Any, errors: dict[str, list[str]], code: int = 400) -> dict[str, Any]:
    metadata = document.get("metadata") if isinstance(document, dict) else None
    return {
        "index": index,
        "kind": document.get("kind") if isinstance(document, dict) else None,
        "name": metadata.get("name") if isinstance(metadata, dict) else None,
        "errors": errors,
        "forbidden": code == 403,
    }
