"""Create (or reset) the demo superuser and print its credentials, for ``make run`` on a laptop."""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create or reset the 'admin' superuser (password from DEMO_ADMIN_PASSWORD or random) and print it."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        password = os.environ.get("DEMO_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        user, _ = User.objects.get_or_create(username=username, defaults={"email": f"{username}@example.com"})
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write(self.style.SUCCESS(f"Demo admin: username {username!r}, password {password!r}"))
