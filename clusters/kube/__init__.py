"""Kube: the portal's side of a cluster's Kubernetes API server, read and written live.

Holds the API client (``client.ClusterGateway``: connection from a ``Cluster`` row's credentials,
get/list/watch/apply/patch/delete of any kind, typed errors), the "test connection" check
(``connection``), live reads of what an object owns (``live``), objects the controllers own,
written by server-side apply (``owned``) and ``metav1.Condition`` lists (``conditions``).

May import: ``clusters.models``, ``clusters.kinds``, ``clusters.validation`` and the
``kubernetes`` client. Never ``clusters.sync`` or ``clusters.web``: the sync engine and the pages
call the cluster through this package, not the other way round. See docs/architecture.md.
"""
