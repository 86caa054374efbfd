"""The OpenAPI schema's generator (drf-spectacular's, ``DEFAULT_SCHEMA_CLASS``), with the answers
every operation can give that drf-spectacular leaves out.

drf-spectacular documents an operation's success answer only. But every operation answers errors
too, and which ones follows from what the operation is: one that takes input (a body, query
parameters) answers 400 for bad input; one that needs a login, 401/403; one with a path parameter,
404 for an object that is not there (or not visible); one with a body, 413 for a body over the
limit and 415 for a media type it does not read; a throttled one, 429. A client generated from a
schema without them fails on the first error it gets; ``tests/api/test_schema_fuzz.py`` holds
every answer to the schema (status code, content type, body). Those errors are added here, once,
for every operation, with DRF's error shape (``{"detail": ...}``, or messages by field); an
operation that documents an error code itself keeps its own.

Request media types: the JSON merge patch parser is global, but reads PATCH bodies only (any
other method answers 415, ``clusters.web.api.parsers``), so only PATCH documents it.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from rest_framework.permissions import AllowAny

from clusters.web.api.parsers import MergePatchJSONParser

# DRF's error bodies: {"detail": "..."}, {"<field>": ["<message>", ...]}, or a list of messages
ERROR_SCHEMA = {
    "description": "An error: `detail` says why, or each field refused has its messages.",
    "oneOf": [
        {"type": "object", "additionalProperties": {}},
        {"type": "array", "items": {"type": "string"}},
    ],
}
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class PortalAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema, documenting the error answers of each operation as well."""

    def map_parsers(self) -> list[Any]:
        media_types = super().map_parsers()
        if self.method != "PATCH":
            media_types = [media_type for media_type in media_types if media_type != MergePatchJSONParser.media_type]
        return media_types

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        component = ResolvedComponent(name="Error", type=ResolvedComponent.SCHEMA, schema=ERROR_SCHEMA, object="Error")
        self.registry.register_on_missing(component)
        for code, description in self.error_answers():
            responses.setdefault(code, {"description": description,
                                        "content": {"application/json": {"schema": component.ref}}})
        return responses

    def error_answers(self) -> list[tuple[str, str]]:
        """(status code, why) of the errors this operation can answer."""
        takes_body = self.method in BODY_METHODS
        parameters = self._get_parameters()
        answers = []
        if takes_body or any(parameter["in"] == "query" for parameter in parameters):
            answers.append(("400", "Bad input: each field refused, with its value and the rule."))
        if not all(isinstance(permission, AllowAny) for permission in self.view.get_permissions()):
            authenticators = self.view.get_authenticators()
            if authenticators and authenticators[0].authenticate_header(None):  # DRF asks the first one only
                answers += [("401", "Not logged in: no credentials, or a token that is malformed, expired or "
                                    "revoked (WWW-Authenticate says the scheme)."),
                            ("403", "Not allowed to do this (or, for a session, no CSRF token).")]
            else:  # no challenge to send: DRF answers the unauthenticated 403 too
                answers.append(("403", "Not logged in, or not allowed to do this."))
        if any(parameter["in"] == "path" for parameter in parameters):
            answers.append(("404", "No such object, or not one the caller may see."))
        if takes_body:
            answers += [("413", "The request body is over the size limit."),
                        ("415", "A media type this operation does not read.")]
        if self.view.get_throttles():
            answers.append(("429", "Too many requests: wait as Retry-After says."))
        return answers
