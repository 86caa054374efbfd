"""Web: what people and scripts see and use of mirrored objects and clusters.

Holds the portal's shared page parts (``portal``, ``forms``, ``filtersets``, ``yaml_review``,
``editor_schema``), the live part of object pages (``live_views``, ``live_urls``), the Django admin
(``admin``, ``admin_quantities``; registered from ``ClustersConfig.ready()``), the REST API
(``api/``) and the write path they all share (``services``, ``edits``).

May import anything below it: ``clusters.sync``, ``clusters.kube``, ``clusters.validation``,
``clusters.models`` and the registries. Nothing below imports ``web``. See docs/architecture.md.
"""
