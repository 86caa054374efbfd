"""Answers in OpenAI's error shape, so OpenAI clients raise their usual exceptions
(``NotFoundError``, ``AuthenticationError``...) with the message the gateway wrote.

Every answer the gateway writes itself has this shape, aiohttp's own included: a path no route
serves (404) or a method its route does not take (405) would otherwise be aiohttp's plain text
``404: Not Found``, which OpenAI clients cannot read; :func:`openai_errors` turns those into
``{"error": ...}`` as OpenAI's API answers them (``Invalid URL (METHOD /path)``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

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


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def openai_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's HTTP errors (the router's 404 and 405, any a handler raises) as OpenAI errors,
    keeping their headers (405's ``Allow``). One ``try`` per request: the handlers return their
    own errors, so nothing is raised on the request path."""
    try:
        return await handler(request)
    except web.HTTPException as error:
        if error.status < 400:
            raise  # a redirect or a success raised as an exception is aiohttp's to send
        headers = {name: value for name, value in error.headers.items()
                   if name.lower() not in ("content-type", "content-length")}
        if isinstance(error, web.HTTPMethodNotAllowed):
            allowed = ", ".join(sorted(error.allowed_methods))
            return error_response(405, f"Invalid method ({request.method} {request.path}): this path takes "
                                  f"{allowed}", "method_not_allowed", headers=headers)
        if isinstance(error, web.HTTPNotFound):
            return error_response(404, f"Invalid URL ({request.method} {request.path})", "unknown_url",
                                  headers=headers)
        return error_response(error.status, error.reason, error.reason.lower().replace(" ", "_"), headers=headers)
