"""The REST API of gitops: staff set the change mode per cluster or namespace (``/api/gitops/modes/``)."""
