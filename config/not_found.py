"""The portal's own 404 page for an object that does not exist or that the user may not see,
whatever DEBUG says.

With DEBUG on (``make run``) Django answers an ``Http404`` with its technical page, listing every
URL pattern of the site; the portal's views raise ``Http404`` for hidden objects on purpose
(never saying whether the object exists), so that page is not for them. A view's ``Http404``
is rendered here with ``404.html``, as Django does with DEBUG off; an unknown URL (raised while
resolving, before any view) keeps Django's handling. The API answers its own JSON 404s (DRF
handles the exception in the view).
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render


class NotFoundPageMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, Http404):
            return None
        return render(request, "404.html", {"exception": str(exception)}, status=404)
