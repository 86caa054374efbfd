"""Answers in OpenAI's error shape, so OpenAI clients raise their usual exceptions
(``NotFoundError``, ``AuthenticationError``...) with the message the gateway wrote."""

from __future__ import annotations

from aiohttp import web

_TYPE_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "invalid_request_error",
    502: "server_error",
    503: "server_error",
}


def error_response(
    status: int, message: str, code: str, param: str | None = None, headers: dict[str, str] | None = None
) -> web.Response:
    """``{"error": {"message", "type", "param", "code"}}`` with ``status``."""
    body = {"error": {"message": message, "type": _TYPE_BY_STATUS.get(status, "server_error"), "param": param,
                      "code": code}}
    return web.json_response(body, status=status, headers=headers)


def model_not_found(model: str) -> web.Response:
    """The same answer whether the model does not exist or belongs to another team's namespace."""
    return error_response(
        404, f"The model `{model}` does not exist or you do not have access to it.", "model_not_found", "model"
    )
