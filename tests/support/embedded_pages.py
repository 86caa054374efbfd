"""Run by tests/test_embedded_defaults.py in its own process: the portal as `make run` has it.

Settings come from the environment the test sets (DATABASE_URL=sqlite:///...), as `make run`
would; every page and API list a demo user opens is rendered through the full middleware stack,
and each path is printed with its status code, one per line.
"""

from __future__ import annotations

import os
import sys

os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.local"  # what manage.py (make run) uses

import django

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from clusters.kinds import all_models  # noqa: E402
from clusters.web.portal import obj_url  # noqa: E402

call_command("migrate", verbosity=0)
call_command("load_demo", verbosity=0)
call_command("ensure_demo_admin", verbosity=0)
client = Client(raise_request_exception=False, HTTP_HOST="127.0.0.1")  # a host the local settings allow
client.force_login(User.objects.get(username="admin"))
paths = [line.strip() for line in sys.stdin if line.strip()]
paths += [obj_url(row) for model in all_models() for row in model.objects.all()]
for path in paths:
    print(path, client.get(path).status_code, flush=True)
planned = client.post("/planning/", {"cluster": "demo", "models": "- kind: InferenceModel\n  id: 1\n"})
print("POST /planning/", planned.status_code, flush=True)
