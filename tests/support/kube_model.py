"""Vocabulary of the test Kubernetes API server: resource types, API errors, selectors.

Kept apart from the store and the HTTP handler so both speak the same terms and so the
selector grammar (the part most likely to be wrong) can be read on its own.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

# Object fields that never count as the object's desired state (see ResourceType.spec_keys).
NON_SPEC_KEYS = frozenset({"apiVersion", "kind", "metadata"})


@dataclasses.dataclass(frozen=True)
class ResourceType:
    """One served resource: what the API server knows about a kind at one group/version.

    ``custom`` marks custom resources because the real server treats them more strictly than
    built-in kinds (PUT without ``metadata.resourceVersion`` is 422, DELETE returns the object
    instead of a ``Status``), and those are exactly the differences the sync has to survive.
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    status_subresource: bool = True
    custom: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` written into objects of this kind (``v1`` for the core group)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str, str]:
        """The identity the store indexes by."""
        return (self.group, self.version, self.plural)

    @property
    def resource_name(self) -> str:
        """``plural.group`` as in the real server's messages (``plural`` for the core group)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """``Kind.group`` as in the real server's validation messages (``Kind`` for core)."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def spec_keys(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The fields whose change bumps ``metadata.generation``.

        The real server bumps generation on any change outside ``metadata`` (and outside
        ``status`` when the status subresource is enabled); for kinds with a ``spec`` that is
        the spec, for kinds without one (ConfigMap) it is their data fields.
        """
        ignored = NON_SPEC_KEYS | {"status"} if self.status_subresource else NON_SPEC_KEYS
        return {key: value for key, value in obj.items() if key not in ignored}

    def discovery_entries(self) -> list[dict[str, Any]]:
        """The ``APIResourceList`` entries for this resource and its ``/status`` subresource."""
        entry: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular or self.kind.lower(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        entries = [entry]
        if self.status_subresource:
            entries.append({
                "name": f"{self.plural}/status",
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            })
        return entries


def _core(group: str, version: str, plural: str, kind: str, *, namespaced: bool = True,
          status: bool = True, short_names: tuple[str, ...] = ()) -> ResourceType:
    return ResourceType(group=group, version=version, plural=plural, kind=kind, namespaced=namespaced,
                        status_subresource=status, custom=False, short_names=short_names)


# The built-in kinds the portal's controllers read or write (DESIGN.md, "Acting as the controller").
CORE_RESOURCES: tuple[ResourceType, ...] = (
    _core("", "v1", "namespaces", "Namespace", namespaced=False, short_names=("ns",)),
    _core("", "v1", "configmaps", "ConfigMap", status=False, short_names=("cm",)),
    _core("", "v1", "nodes", "Node", namespaced=False, short_names=("no",)),
    _core("apps", "v1", "deployments", "Deployment", short_names=("deploy",)),
    _core("batch", "v1", "jobs", "Job"),
    _core("batch", "v1", "cronjobs", "CronJob", short_names=("cj",)),
    _core("coordination.k8s.io", "v1", "leases", "Lease", status=False),
)


def resources_from_crd(manifest: Mapping[str, Any]) -> list[ResourceType]:
    """Every served version of a ``CustomResourceDefinition`` manifest as a ResourceType."""
    if manifest.get("kind") != "CustomResourceDefinition":
        raise ValueError(f"kind must be CustomResourceDefinition, got {manifest.get('kind')!r}")
    spec = manifest["spec"]
    names = spec["names"]
    return [
        ResourceType(
            group=spec["group"],
            version=version["name"],
            plural=names["plural"],
            kind=names["kind"],
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            status_subresource="status" in (version.get("subresources") or {}),
            singular=names.get("singular", ""),
            short_names=tuple(names.get("shortNames", ())),
            categories=tuple(names.get("categories", ())),
        )
        for version in spec["versions"]
        if version.get("served", True)
    ]


class ApiError(Exception):
    """An API failure rendered as a Kubernetes ``Status`` object.

    The official client builds ``ApiException`` from the HTTP status and keeps the body, and
    the sync branches on ``reason`` and ``details.causes``; so every failure carries them.
    """

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        name: str | None = None,
        resource: ResourceType | None = None,
        causes: Sequence[Mapping[str, str]] = (),
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.name = name
        self.resource = resource
        self.causes = list(causes)
        self.retry_after = retry_after

    def status(self) -> dict[str, Any]:
        """The ``Status`` body, shaped like the real server's (details.kind is the plural)."""
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.resource is not None:
            if self.resource.group:
                details["group"] = self.resource.group
            details["kind"] = self.resource.plural
        if self.causes:
            details["causes"] = self.causes
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if details:
            body["details"] = details
        return body

    @classmethod
    def not_found(cls, resource: ResourceType, name: str) -> ApiError:
        return cls(404, "NotFound", f'{resource.resource_name} "{name}" not found',
                   name=name, resource=resource)

    @classmethod
    def already_exists(cls, resource: ResourceType, name: str) -> ApiError:
        return cls(409, "AlreadyExists", f'{resource.resource_name} "{name}" already exists',
                   name=name, resource=resource)

    @classmethod
    def conflict(cls, resource: ResourceType, name: str, detail: str | None = None) -> ApiError:
        """409 Conflict; without ``detail`` it is the stale-resourceVersion message verbatim."""
        detail = detail or (
            "the object has been modified; please apply your changes to the latest version and try again"
        )
        return cls(409, "Conflict", f'Operation cannot be fulfilled on {resource.resource_name} "{name}": {detail}',
                   name=name, resource=resource)

    @classmethod
    def invalid(cls, resource: ResourceType, name: str, field: str, value: str, detail: str) -> ApiError:
        """422 Invalid naming the field, the value and the rule, as field validation does."""
        cause = f"Invalid value: {value}: {detail}"
        return cls(422, "Invalid", f'{resource.qualified_kind} "{name}" is invalid: {field}: {cause}',
                   name=name, resource=resource,
                   causes=[{"reason": "FieldValueInvalid", "message": cause, "field": field}])

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(400, "BadRequest", message)

    @classmethod
    def gone(cls, message: str) -> ApiError:
        return cls(410, "Expired", message)

    @classmethod
    def from_status_code(cls, code: int, resource: ResourceType | None, name: str | None,
                         message: str | None = None, retry_after: int | None = None) -> ApiError:
        """A plausible error for an HTTP status, used by fault injection."""
        if code == 409 and resource is not None:
            return cls.conflict(resource, name or "")
        reasons = {400: "BadRequest", 404: "NotFound", 409: "Conflict", 410: "Expired", 422: "Invalid",
                   429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
                   504: "Timeout"}
        default_messages = {
            410: "too old resource version",
            429: "Too many requests, please try again later.",
            500: "Internal error occurred: injected fault",
        }
        phrase = HTTPStatus(code).phrase if code in HTTPStatus._value2member_map_ else "Error"
        return cls(code, reasons.get(code, phrase.replace(" ", "")),
                   message or default_messages.get(code, phrase), name=name, resource=resource,
                   retry_after=retry_after)


_KEY = r"[A-Za-z0-9][A-Za-z0-9._/-]*"
_VALUE = r"[A-Za-z0-9._-]*"
_SET_RE = re.compile(rf"^({_KEY})\s+(in|notin)\s+\(([^)]*)\)$")
_CMP_RE = re.compile(rf"^({_KEY})\s*(==|=|!=)\s*({_VALUE})$")
_EXISTS_RE = re.compile(rf"^(!?)\s*({_KEY})$")


@dataclasses.dataclass(frozen=True)
class Requirement:
    """One clause of a label or field selector; ``op`` is one of =, !=, in, notin, exists, !."""

    key: str
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, present: bool, value: str | None) -> bool:
        match self.op:
            case "exists":
                return present
            case "!":
                return not present
            case "=" | "in":
                return present and value in self.values
            case _:  # "!=" and "notin" match objects without the key too, as in Kubernetes
                return not present or value not in self.values


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside ``in (a,b)`` parentheses."""
    parts: list[str] = []
    depth, start = 0, 0
    for index, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def parse_label_selector(text: str | None) -> tuple[Requirement, ...]:
    """Parse the ``labelSelector`` grammar (=, ==, !=, in, notin, exists, !exists)."""
    requirements: list[Requirement] = []
    for clause in _split_top_level(text or ""):
        if match := _SET_RE.match(clause):
            values = frozenset(v.strip() for v in match.group(3).split(",") if v.strip())
            requirements.append(Requirement(match.group(1), match.group(2), values))
        elif match := _CMP_RE.match(clause):
            op = "!=" if match.group(2) == "!=" else "="
            requirements.append(Requirement(match.group(1), op, frozenset({match.group(3)})))
        elif match := _EXISTS_RE.match(clause):
            requirements.append(Requirement(match.group(2), "!" if match.group(1) else "exists"))
        else:
            raise ApiError.bad_request(f"unable to parse requirement: {clause!r}")
    return tuple(requirements)


SUPPORTED_FIELDS = ("metadata.name", "metadata.namespace")


def parse_field_selector(text: str | None) -> tuple[Requirement, ...]:
    """Parse ``fieldSelector``; only the fields every kind supports are accepted."""
    requirements: list[Requirement] = []
    for clause in _split_top_level(text or ""):
        match = _CMP_RE.match(clause)
        if match is None:
            raise ApiError.bad_request(f"invalid field selector: {clause!r}")
        if match.group(1) not in SUPPORTED_FIELDS:
            raise ApiError.bad_request(f'field label not supported: {match.group(1)}')
        op = "!=" if match.group(2) == "!=" else "="
        requirements.append(Requirement(match.group(1), op, frozenset({match.group(3)})))
    return tuple(requirements)


@dataclasses.dataclass(frozen=True)
class Selector:
    """Label and field requirements of one list or watch request."""

    labels: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    @classmethod
    def parse(cls, label_selector: str | None, field_selector: str | None) -> Selector:
        return cls(parse_label_selector(label_selector), parse_field_selector(field_selector))

    def __bool__(self) -> bool:
        return bool(self.labels or self.fields)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        metadata = obj.get("metadata") or {}
        labels = metadata.get("labels") or {}
        for requirement in self.labels:
            if not requirement.matches(requirement.key in labels, labels.get(requirement.key)):
                return False
        for requirement in self.fields:
            value = metadata.get(requirement.key.removeprefix("metadata.")) or ""
            if not requirement.matches(True, value):
                return False
        return True
