"""Turn validation failures raised below the serializers into field-level 400s, never 500s, and
refused edits (an older copy, a deleting object) into 409s naming the reason. A database or
recursion error that still gets past validation is bad input too: a 400 with the database's own
words (which name the column or constraint), the transaction rolled back, never a 500."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, IntegrityError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from clusters.validation.schemas import FieldError, ManifestInvalid, clip
from clusters.web.edits import EditRefused


def field_error_detail(errors: list[FieldError]) -> dict[str, list[str]]:
    """``{"spec.memory": ["spec.memory: \"16GB\" does not match ..."]}``: keyed by manifest path."""
    detail: dict[str, list[str]] = {}
    for error in errors:
        detail.setdefault(error.path, []).append(error.message)
    return detail


def exception_handler(exc: Exception, context: dict[str, Any]):
    if isinstance(exc, EditRefused):
        return Response(exc.as_dict(), status=status.HTTP_409_CONFLICT)
    if isinstance(exc, ManifestInvalid):
        exc = exceptions.ValidationError(field_error_detail(exc.errors))
    elif isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    elif isinstance(exc, DataError | IntegrityError):
        exc = exceptions.ValidationError({"database": [clip(f"the database refused a value: {exc}".strip())]})
    elif isinstance(exc, RecursionError):
        exc = exceptions.ValidationError({"request": ["values are nested too deeply to process"]})
    return drf_exception_handler(exc, context)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 404 (``handler404``): under ``/api/`` in DRF's JSON shape, as every other API error
    is (a path no route matches, such as a kind or an id the URL's converter refuses); pages keep
    the portal's HTML page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": f"no API endpoint or object at {clip(request.path)}"}, status=404)
    return page_not_found(request, exception)
