"""What a request's body asks of the engine, read as the engines read it: the tokens it may generate
and whether its answer is a stream.

**Why the gateway validates these fields itself.** A reservation (:func:`reservation`) is only a
bound if it is at least what the engine will generate, and the engines do not agree on which field
caps a completion: vLLM and SGLang honour ``max_completion_tokens`` first and ``max_tokens`` when it
is absent, older engines (and TGI's OpenAI API) only ``max_tokens``. So the reservation is the
larger of the two, times the completions the body asks for (``n``, ``best_of``, and on
``/v1/completions`` one per prompt of a list). And the engines' pydantic models read numbers and
booleans laxly: ``"max_tokens": "1000"`` or ``1000.0`` is 1,000 to vLLM, ``"stream": 1`` or
``"true"`` a stream. Rather than copy pydantic's lax rules (and differ from an engine that does not
use them), the gateway accepts exactly what OpenAI's API accepts, JSON integers in bounds and JSON
booleans (``null`` is absent), and answers anything else with a 400 in OpenAI's shape naming the
field, before any counter is touched. Every value it lets through then means the same to every
engine.

**Engine defaults.** A body that caps neither field gets the engine's default, which can be the
model's whole context. When a tokens limit applies, the gateway writes the cap it reserved into the
body it sends (:func:`capped`): ``max_tokens`` (read by every engine) set to
``USAGE_RESERVE_COMPLETION_TOKENS`` when the body set no cap, or to ``max_completion_tokens`` when
only that was set (an engine that ignores it would otherwise generate up to its default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

COMPLETIONS = "/v1/completions"
MAX_TOKENS = 2**31 - 1  # the largest cap accepted: the ledger's token columns (and any engine's context) hold less
MAX_CHOICES = 128  # OpenAI's bound on ``n``
CAPS = ("max_completion_tokens", "max_tokens")
COUNTS = ("n", "best_of")  # completions generated per prompt (best_of: vLLM generates that many, returns n)
JSON_TYPES = {str: "a string", float: "a decimal number", bool: "a boolean", list: "an array", dict: "an object",
              int: "an integer"}


class BodyRefused(Exception):
    """A field no engine should be left to interpret: answered 400, OpenAI's shape."""

    def __init__(self, param: str, message: str, code: str) -> None:
        super().__init__(message)
        self.param, self.code = param, code

    def response(self) -> web.Response:
        error = {"message": str(self), "type": "invalid_request_error", "param": self.param, "code": self.code}
        return web.json_response({"error": error}, status=400)


@dataclass(frozen=True)
class Asked:
    """What a body asks for: ``cap`` the largest completion cap it sets (None: none), ``completions``
    how many completions it generates, ``stream`` whether its answer is a stream."""

    cap: int | None
    completions: int
    stream: bool


def _json_type(value: Any) -> str:
    return JSON_TYPES.get(type(value), type(value).__name__)


def _integer(value: Any, name: str, most: int) -> int:
    """A field's (not null) value as OpenAI reads an integer, else :class:`BodyRefused`."""
    if type(value) is not int:  # not bool (a subclass), not 10.0, not "10": OpenAI refuses them, vLLM would not
        raise BodyRefused(name, f"Invalid type for '{name}': expected an integer, but got {_json_type(value)} "
                          "instead.", "invalid_type")
    if value < 1:
        raise BodyRefused(name, f"Invalid '{name}': integer below minimum value. Expected a value >= 1, but got "
                          f"{value} instead.", "integer_below_min_value")
    if value > most:
        raise BodyRefused(name, f"Invalid '{name}': integer above maximum value. Expected a value <= {most}, but "
                          f"got {value} instead.", "integer_above_max_value")
    return value


def _largest(data: dict[str, Any], names: tuple[str, ...], most: int) -> int | None:
    """The largest of the integer fields ``names`` that are set (None: none is)."""
    found = None
    for name in names:
        value = data.get(name)
        if value is not None:
            value = _integer(value, name, most)
            found = value if found is None or value > found else found
    return found


def _boolean(data: dict[str, Any], name: str) -> bool:
    value = data.get(name)
    if value is None:
        return False
    if type(value) is not bool:  # 1, "true": a stream to vLLM's pydantic model, so not left to it
        raise BodyRefused(name, f"Invalid type for '{name}': expected a boolean, but got {_json_type(value)} "
                          "instead.", "invalid_type")
    return value


def _prompts(data: dict[str, Any], path: str) -> int:
    """Prompts of a ``/v1/completions`` body (a list of strings or of token lists: one completion
    each; a string or one token list: one)."""
    prompt = data.get("prompt") if path == COMPLETIONS else None
    if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
        return len(prompt)
    return 1


def asked(data: dict[str, Any], path: str) -> Asked:
    """Read (and validate, :class:`BodyRefused`) the fields that decide what a request may generate."""
    completions = (_largest(data, COUNTS, MAX_CHOICES) or 1) * (_prompts(data, path) if path == COMPLETIONS else 1)
    return Asked(_largest(data, CAPS, MAX_TOKENS), completions, _boolean(data, "stream"))


def reservation(request: Asked, body_bytes: int, completion_default: int, bytes_per_token: float,
                generates: bool = True) -> int:
    """The tokens a request may take: the largest completion any engine would generate for it (its
    cap, else ``completion_default``, the cap :func:`capped` sends; none for embeddings,
    ``generates=False``) per completion, plus its prompt estimated from the body's size."""
    completion = (request.cap or completion_default) * request.completions if generates else 0
    return completion + prompt_estimate(body_bytes, bytes_per_token)


def prompt_estimate(body_bytes: int, bytes_per_token: float) -> int:
    """The prompt's tokens as reserved: the body's bytes over ``bytes_per_token``, rounded up."""
    return max(1, int(body_bytes / bytes_per_token + 0.999))


def capped(data: dict[str, Any], request: Asked, completion_default: int) -> dict[str, Any]:
    """The fields to set in the body sent upstream so that every engine stops at the reserved cap
    (none when the body sets ``max_tokens``: with ``max_completion_tokens`` too, the larger of the
    two is reserved, whichever one the engine honours)."""
    if data.get("max_tokens") is not None:
        return {}
    return {"max_tokens": request.cap or completion_default}
