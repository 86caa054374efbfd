"""Embedded default for a laptop: DEBUG on unless the environment says otherwise."""

import os

os.environ.setdefault("DEBUG", "true")

from config.settings.base import *  # noqa: F403
