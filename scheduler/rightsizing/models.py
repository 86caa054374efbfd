"""Right-sizing models: observations and reports."""
