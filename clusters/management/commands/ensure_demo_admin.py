"""Create the demo superuser once and print its credentials, for ``make run`` on a laptop.

The password stays the same from one ``make run`` to the next (resetting it would log everyone
out): it is ``DEMO_ADMIN_PASSWORD`` when set, else a random one made on the first run and kept in
``DEMO_ADMIN_PASSWORD_FILE`` (default ``.demo-admin-password`` beside the code, readable by its
owner only, git-ignored).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand


def demo_password() -> str:
    if os.environ.get("DEMO_ADMIN_PASSWORD"):
        return os.environ["DEMO_ADMIN_PASSWORD"]
    path = Path(os.environ.get("DEMO_ADMIN_PASSWORD_FILE") or Path(settings.BASE_DIR) / ".demo-admin-password")
    if path.exists():
        return path.read_text().strip()
    password = secrets.token_urlsafe(12)
    path.touch(mode=0o600)
    path.write_text(password + "\n")
    return password


class Command(BaseCommand):
    help = "Create the 'admin' superuser once (password kept across runs) and print its credentials."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        password = demo_password()
        user, created = User.objects.get_or_create(username=username, defaults={"email": f"{username}@example.com"})
        if created or not (user.is_staff and user.is_superuser and user.check_password(password)):
            user.is_staff = user.is_superuser = True
            user.set_password(password)
            user.save()
        self.stdout.write(self.style.SUCCESS(f"Demo admin: username {username!r}, password {password!r}"))
