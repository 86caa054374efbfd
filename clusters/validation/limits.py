"""Size and shape limits of input, shared with Kubernetes where Kubernetes has one.

The portal refuses up front what the cluster would refuse later (so nothing is stored that can
never be applied), and bounds the work any one request can cause (so bad input is a quick 4xx,
never a slow reply or a 500).
"""

from __future__ import annotations

# kube-apiserver refuses request bodies above 3 MiB (apiserver's MaxRequestBodyBytes).
MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024
# etcd's default request limit (--max-request-bytes, 1.5 MiB): the largest object a cluster stores.
MAX_OBJECT_BYTES = 3 * 512 * 1024
# apimachinery's TotalAnnotationSizeLimitB: keys and values of all annotations together.
MAX_ANNOTATIONS_BYTES = 256 * 1024
# Nested arrays and objects, counted from the request body's root. No manifest of the mirrored kinds
# comes near it; the code that merges, diffs and prints values recurses, and must stay far from
# Python's recursion limit (1,000 frames) whatever a client sends.
MAX_NESTING_DEPTH = 100
# YAML aliases (*name) may add at most this much (weighed as characters plus one per node) to what
# a request body holds: a few kilobytes of aliases must not become gigabytes ("billion laughs").
MAX_ALIAS_EXPANSION = MAX_REQUEST_BODY_BYTES
# Error messages quote the value they refuse; a quoted value is cut at this many characters.
MAX_QUOTED_CHARS = 200
# Errors reported for one manifest: enough to fix a document, never a reply larger than the input.
MAX_ERRORS = 100
# The largest integer a Kubernetes quantity or an int64 field holds (quantities above it are capped).
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
