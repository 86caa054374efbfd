"""Settings for the test suite: fast password hashing, eager Celery unless a test starts a worker."""

from config.settings.base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    # A file, not shared in-memory: sync tests run watchers in threads, and an in-memory
    # database shared between threads fails with "table is locked" instead of waiting.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "test-db.sqlite3")}  # noqa: F405
