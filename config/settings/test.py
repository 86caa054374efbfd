"""Settings for the test suite: fast password hashing, eager Celery unless a test starts a worker."""

import os
import tempfile
from pathlib import Path

from config.settings.base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True
# The tests' backends run on loopback; refusal tests turn it off with the `settings` fixture.
GATEWAY_ALLOW_LOOPBACK = True
# One process per `manage.py gateway` a test starts; tests/gateway/test_workers.py asks for more.
GATEWAY_WORKERS = 1
# The test backend's own headers (devstack/openai_backend.py): which replica answered, and the trace
# context it was called in; a backend's headers pass only when named (inference_gateway/headers.py).
GATEWAY_PASSED_HEADERS = ["X-Backend", "X-Received-Traceparent"]

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    # A file, not shared in-memory: sync tests run watchers in threads, and an in-memory
    # database shared between threads fails with "table is locked" instead of waiting.
    # One file per test process, so parallel runs never share it.
    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": str(Path(tempfile.gettempdir()) / f"inference-portal-test-{os.getpid()}.sqlite3")
    }
else:
    # A database per test process, so parallel runs (and CI beside a developer) never collide.
    DATABASES["default"]["TEST"] = {"NAME": f"test_portal_{os.getpid()}"}  # noqa: F405
