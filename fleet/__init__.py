"""Fleet views: pods and events across every cluster and namespace a person may see, and the
audit log across every mirrored object (portal pages only; no models of its own)."""
