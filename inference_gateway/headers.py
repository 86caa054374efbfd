"""Which of a backend's response headers reach the client: an allow-list, not a deny-list.

A backend's answer is passed on as the gateway's own, and the gateway is every team's front door
on one host name: a backend's ``Set-Cookie`` would set a cookie for every team's clients, its
``Access-Control-Allow-Origin: *`` would open the gateway to any web page, its
``WWW-Authenticate`` would ask the client for credentials the gateway never takes, its
``Location`` would name addresses inside the cluster. A deny-list misses the next such header, so
only these pass:

- ``Content-Type``, by :func:`content_type`: one an OpenAI client reads (JSON, an event stream,
  plain text, written by the gateway without the backend's parameters), the gateway's
  ``application/json`` when the backend sent none, and a 502 for anything else (an HTML error
  page of a proxy in front of the model is not an answer a client can read);
- :data:`ALWAYS_PASSED`: the body's encoding (the gateway passes bodies as sent, compressed or
  not), ``Retry-After`` (OpenAI's clients honour it) and ``X-Request-Id`` (the engine's id of the
  request, which OpenAI's clients report);
- the names in ``GATEWAY_PASSED_HEADERS`` (an operator's choice, e.g. an engine's own diagnostics),
  which may not name one of :data:`NEVER_PASSED` (checked when the gateway starts).

The gateway adds its own (``x-ratelimit-*``, ``Content-Length``, ``Date``, ``Server``) after.
A header the backend's ``Connection`` header names is hop-by-hop (RFC 9110) and never passed.
"""

from __future__ import annotations

from collections.abc import Iterable

from multidict import CIMultiDictProxy

ALWAYS_PASSED = frozenset({"content-encoding", "retry-after", "x-request-id"})
# Why each may never come from a backend, whatever GATEWAY_PASSED_HEADERS says; a name ending in
# "*" is a prefix.
NEVER_PASSED = {
    "content-type": "the gateway decides it (JSON, event stream or plain text)",
    "content-length": "the gateway frames the body itself",
    "transfer-encoding": "the gateway frames the body itself",
    "connection": "it is hop-by-hop",
    "keep-alive": "it is hop-by-hop",
    "upgrade": "it is hop-by-hop",
    "te": "it is hop-by-hop",
    "trailer": "it is hop-by-hop",
    "proxy-*": "it is hop-by-hop",
    "set-cookie*": "a backend's cookie would be set for every team's clients",
    "www-authenticate": "the gateway's clients authenticate with the gateway's tokens, not the backend's",
    "authentication-info": "the gateway's clients authenticate with the gateway's tokens, not the backend's",
    "access-control-*": "CORS is the gateway's decision, never a backend's",
    "location": "it names the backend's addresses",
    "content-location": "it names the backend's addresses",
    "refresh": "it names the backend's addresses",
    "alt-svc": "it names the backend's addresses",
    "strict-transport-security": "it binds the gateway's host name",
    "clear-site-data": "it binds the gateway's host name",
    "x-ratelimit-*": "the gateway sets its own, from the team's limits",
    "date": "the gateway sets its own",
    "server": "the gateway sets its own",
}
# The media types an OpenAI client reads, and what the gateway writes for each.
CONTENT_TYPES = {
    "application/json": "application/json",
    "text/event-stream": "text/event-stream",
    "text/plain": "text/plain; charset=utf-8",
}
DEFAULT_CONTENT_TYPE = "application/json"


def never_passed(name: str) -> str | None:
    """Why the backend's header ``name`` may never reach a client, or None."""
    name = name.lower()
    for rule, why in NEVER_PASSED.items():
        if name == rule or (rule.endswith("*") and name.startswith(rule[:-1])):
            return why
    return None


def passed_header_errors(names: Iterable[str]) -> list[str]:
    """What is wrong with ``GATEWAY_PASSED_HEADERS``: one message per name it may not hold."""
    errors = []
    for name in names:
        why = never_passed(name)
        if why is not None:
            errors.append(f"GATEWAY_PASSED_HEADERS: {name!r} may never come from a backend: {why}")
    return errors


def content_type(upstream: CIMultiDictProxy[str], mimetype: str) -> str | None:
    """The Content-Type the client gets for an answer of ``mimetype`` (aiohttp's parse of the
    backend's header), or None when it is one no OpenAI client reads."""
    if "Content-Type" not in upstream:
        return DEFAULT_CONTENT_TYPE
    return CONTENT_TYPES.get(mimetype)


def answer_headers(upstream: CIMultiDictProxy[str], passed: frozenset[str], content: str) -> dict[str, str]:
    """The backend's headers the client may see (``passed``: lower-case names, ``ALWAYS_PASSED``
    and the operator's), with ``content`` as the Content-Type."""
    headers = {"Content-Type": content}
    named: set[str] = set()
    if "Connection" in upstream:
        named = {part.strip().lower() for value in upstream.getall("Connection") for part in value.split(",")}
    for name, value in upstream.items():
        lowered = name.lower()
        if lowered in passed and lowered not in named:
            headers[name] = value
    return headers
