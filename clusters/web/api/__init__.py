"""The REST API (Django REST framework): clusters and every mirrored kind, and ``/api/apply/``.

Part of ``clusters.web``: may import anything of ``clusters`` below web (docs/architecture.md).
"""
