"""Embedded default for a laptop: DEBUG on unless the environment says otherwise."""

import os

os.environ.setdefault("DEBUG", "true")
# the local demo serves its models from loopback backends (inference_gateway/placement.py)
os.environ.setdefault("GATEWAY_ALLOW_LOOPBACK", "true")

from config.settings.base import *  # noqa: F403
