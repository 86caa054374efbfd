"""Answers in OpenAI's error shape, so OpenAI clients raise their usual exceptions
(``NotFoundError``, ``AuthenticationError``...) with the message the gateway wrote.

Every answer the gateway writes itself has this shape, aiohttp's own included: a path no route
serves (404) or a method its route does not take (405) would otherwise be aiohttp's plain text
``404: Not Found``, which OpenAI clients cannot read; :func:`unrouted` answers those as
``{"error": ...}`` as OpenAI's API answers them (``Invalid URL (METHOD /path)``)."""

from __future__ import annotations

from aiohttp import web

_TYPE_BY_STATUS = {
    401: "authentication_error",
    403: "permission_error",
}


def error_type(status: int) -> str:
    """OpenAI's ``type`` for a status: the client's fault (4xx) is an ``invalid_request_error``
    unless it is about credentials, the gateway's or a backend's (5xx) a ``server_error``."""
    return _TYPE_BY_STATUS.get(status, "invalid_request_error" if status < 500 else "server_error")


def error_response(
    status: int, message: str, code: str, param: str | None = None, headers: dict[str, str] | None = None
) -> web.Response:
    """``{"error": {"message", "type", "param", "code"}}`` with ``status``."""
    body = {"error": {"message": message, "type": error_type(status), "param": param, "code": code}}
    return web.json_response(body, status=status, headers=headers)


def not_authenticated(message: str) -> web.Response:
    """OpenAI's 401 for a missing, invalid, expired or revoked key, with the challenge RFC 6750 asks
    of a 401 (``WWW-Authenticate: Bearer``), so HTTP clients and proxies read it as one."""
    return error_response(401, message, "invalid_api_key",
                          headers={"WWW-Authenticate": 'Bearer realm="inference-gateway"'})


def model_not_found(model: str) -> web.Response:
    """The same answer whether the model does not exist or belongs to another team's namespace."""
    return error_response(
        404, f"The model `{model}` does not exist or you do not have access to it.", "model_not_found", "model"
    )


async def unrouted(request: web.Request) -> web.Response:
    """The catch-all route's handler (registered after every other route): a path no route serves
    is OpenAI's 404, a method its route does not take a 405 whose ``Allow`` names the methods it
    does. A route rather than a middleware: a middleware wraps every request (a call and a
    coroutine more each, a visible share of a proxied request's CPU); this runs only for the
    requests it answers. The methods a path takes are asked of the other routes, as aiohttp's
    router does for its own 405."""
    allowed: set[str] = set()
    for resource in request.app.router.resources():
        if resource is not request.match_info.route.resource:
            allowed |= (await resource.resolve(request))[1]
    if allowed:
        methods = sorted(allowed)
        return error_response(405, f"Invalid method ({request.method} {request.path}): this path takes "
                              f"{', '.join(methods)}", "method_not_allowed", headers={"Allow": ",".join(methods)})
    return error_response(404, f"Invalid URL ({request.method} {request.path})", "unknown_url")
