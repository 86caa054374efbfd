"""Request checks that hold for every page and endpoint, before any view reads the request."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from clusters.validation.limits import MAX_REQUEST_BODY_BYTES
from clusters.validation.schemas import FieldError


class RequestLimitsMiddleware:
    """413 for a body over kube-apiserver's 3 MiB; 400 for a query parameter holding NUL.

    The body limit is checked on ``Content-Length`` before anything is read (Django reads no more
    than that header announces, so a body without one is empty). NUL reaches PostgreSQL from
    any filter, search or ordering parameter and makes it raise; refusing it here covers them all.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0  # Django itself treats a malformed length as an empty body
        if length > MAX_REQUEST_BODY_BYTES:
            return JsonResponse(
                {"detail": f"request body: {length} bytes, more than the limit {MAX_REQUEST_BODY_BYTES} (3 MiB)"},
                status=413,
            )
        errors = [
            FieldError(key, value, "must not contain NUL characters")
            for key, values in request.GET.lists()
            for value in values
            if "\x00" in key or "\x00" in value
        ]
        if errors:
            return JsonResponse({error.path: [error.message] for error in errors}, status=400)
        return self.get_response(request)
