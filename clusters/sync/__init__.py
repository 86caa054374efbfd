"""Sync: the engine that keeps portal rows and cluster objects in step, both ways.

Holds cluster -> portal (``watcher``, ``watch_supervisor``, ``leader``, ``resync``, ``ingest``,
``bulk``, ``inbound``), portal -> cluster (``outbound``, ``merge``), the controller passes
(``controllers``, ``work_queue``) and handing kinds back (``handover``, ``signals``), the Celery
tasks (``tasks``), the audit trail of changes from either side (``audit``) and the sync's health
(``stats``, ``metrics``).

May import: ``clusters.kube``, ``clusters.validation``, ``clusters.models`` and the registries
(``clusters.kinds``, ``clusters.controller_registry``). Never ``clusters.web``: pages, forms, the
admin and the API call into the sync, never the reverse. See docs/architecture.md.
"""
