"""``{{ value|as_yaml }}``: a value of a spec shown as people write it in a manifest.

The audit history stores changes as JSON values; printed raw they read as Python reprs
(``{'memory': '80Gi'}``, ``True``, ``None``). YAML is how the users wrote them.
"""

from __future__ import annotations

from typing import Any

import yaml
from django import template

register = template.Library()


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (a script, a certificate) as literal blocks, line by line as written."""


_Dumper.add_representer(
    str,
    lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None),
)


@register.filter
def as_yaml(value: Any) -> str:
    """Block YAML for maps and lists, the plain YAML scalar otherwise (``true``, ``80Gi``,
    ``'3'`` for a string that would read as a number); an empty map or list as ``{}``/``[]``."""
    if isinstance(value, (dict, list)) and value:
        return yaml.dump(value, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True).rstrip(
            "\n"
        )
    text = yaml.dump(value, Dumper=_Dumper, default_flow_style=True, allow_unicode=True, width=10_000)
    return text.removesuffix("\n").removesuffix("\n...").rstrip("\n")
