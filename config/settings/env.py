"""Typed readers for settings taken from the environment (12-factor)."""

import os


def env_str(name: str, default: str = "") -> str:
    """Return the variable, or ``default`` when unset or empty."""
    return os.environ.get(name) or default


def env_bool(name: str, default: bool = False) -> bool:
    """Accept the usual spellings of true/false so `DEBUG=0` and `DEBUG=false` both work."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"{name}={raw!r} is not a boolean (use true/false, 1/0, yes/no, on/off)")


def env_list(name: str, default: list[str]) -> list[str]:
    """Comma-separated list; blanks are dropped."""
    raw = os.environ.get(name)
    if not raw:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None


def env_float(name: str, default: float, above: float | None = None, at_least: float | None = None) -> float:
    """A number; with ``above``, one greater than it (a setting a request is divided by, say); with
    ``at_least``, one not below it."""
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None
    if above is not None and not value > above:  # NaN is not either
        raise ValueError(f"{name}={raw!r} must be a number greater than {above:g}")
    if at_least is not None and not value >= at_least:
        raise ValueError(f"{name}={raw!r} must be a number of at least {at_least:g}")
    return value
