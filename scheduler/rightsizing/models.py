"""Right-sizing models (observations, reports); imported by scheduler/models.py so Django finds them."""
