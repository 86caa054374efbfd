"""Validation: the rules a manifest, a field or a piece of YAML must meet, written once.

Holds the CRD schema check and the shared error types (``schemas``), the metadata, JSON-value and
cross-field rules (``metadata_rules``, ``json_values``, ``spec_rules``), input limits and
Kubernetes quantities (``limits``, ``quantities``), bounded YAML input (``yaml_input``) and the
one entry point every write path calls (``manifests.validate_manifest``).

May import: ``clusters.kinds`` (the kind registry) and nothing else of ``clusters``; no database
access at import time. Models' ``clean()`` calls these rules, so this package sits *below*
``clusters.models``: it never imports the models, ``kube``, ``sync`` or ``web`` (type hints of
models go under ``TYPE_CHECKING``). See docs/architecture.md.
"""
