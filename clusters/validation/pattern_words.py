"""The CRDs' ``pattern`` rules said in words: an error names what the field takes, with an
example, instead of quoting a regular expression (``clusters.validation`` words every failure).

Keyed by the CRD's own pattern text; tests/clusters/test_pattern_words.py checks that every
pattern of every CRD in platform/crds/ has its words here.
"""

from __future__ import annotations

QUANTITY = r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"  # noqa: E501

PATTERN_WORDS: dict[str, str] = {
    QUANTITY: "is not a Kubernetes quantity such as 16Gi, 500m or 2",
    r"^[0-9]+(Ki|Mi|Gi|Ti)$": "is not a Kubernetes quantity such as 16Gi (a whole number of Ki, Mi, Gi or Ti)",
    r"^[0-9]+$": "is not a whole number such as 1 (written as a string)",
    r"^/": "is not an absolute path (it must start with /)",
    r"^[a-zA-Z0-9-]+:[0-9]+$": "is not a resource profile and count such as nvidia-gpu-l4:1",
    r"^[a-z0-9-]+$": "may hold only lowercase letters, digits and '-', such as my-adapter",
    r"^(hf://[^/\s]+/[^\s]+|pvc://[^/\s]+(/[^\s]*)?|(s3|gs|oss)://[^/\s]+(/[^\s]*)?|ollama://[^\s]+)$": (
        "is not a model URL such as hf://Qwen/Qwen3-8B, pvc://models/qwen, s3://bucket/path or ollama://gemma2:2b"
    ),
    r"^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+)$": "is not a duration such as 10m, 1h30m or 0",
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$": (
        "is not a Prometheus duration such as 30s, 1m or 1h30m"
    ),
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly)|(\S+\s+){4}\S+)$": (
        "is not a cron schedule of 5 fields such as '0 3 * * *', nor one of @hourly, @daily, @weekly, "
        "@monthly, @yearly"
    ),
    r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$": (
        "is not a host name such as models.example.com or *.example.com (lowercase letters, digits, '-' and '.')"
    ),
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$": (  # noqa: E501
        "is not a condition type such as Ready or example.com/Ready"
    ),
    r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$": "is not a CamelCase reason such as Deployed",
}


def pattern_rule(pattern: str) -> str:
    """What a value breaking the CRD's ``pattern`` is not, in words; the pattern itself for one not worded."""
    return PATTERN_WORDS.get(pattern, f"does not match the pattern {pattern}")
