"""The calculator's REST API: the estimate with GPUs per type and pools, and the presets (mounted by
``scheduler.api.urls`` under /api/)."""
