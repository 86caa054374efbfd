"""Re-encrypt every stored cluster credential with the current first key (the rotation step).

The encrypted-field library gives an undecryptable value back as its ciphertext instead of failing,
so each stored value is first checked against the configured keys: if one no longer decrypts (its
key was dropped too early), nothing is written and the command names it.
"""

from __future__ import annotations

from typing import Any

from cryptography.fernet import InvalidToken
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.db.models import F, TextField
from django.db.models.functions import Cast

from clusters.models import Cluster

SECRETS = ("bearer_token", "prometheus_auth_header")


class Command(BaseCommand):
    help = "Re-encrypt cluster credentials with the first of FIELD_ENCRYPTION_KEYS / SECRET_KEY (after a rotation)."

    def handle(self, *args: Any, **options: Any) -> None:
        raw = Cluster.objects.values_list("name", *(Cast(F(name), TextField()) for name in SECRETS))
        undecryptable = []
        for name, *values in raw:
            for field, value in zip(SECRETS, values, strict=True):
                try:
                    if value:
                        Cluster._meta.get_field(field).f.decrypt(value.encode())
                except InvalidToken:
                    undecryptable.append(f"{name}.{field}")
        if undecryptable:
            raise CommandError(
                "no configured key decrypts " + ", ".join(undecryptable) + ": put the old key back "
                "(FIELD_ENCRYPTION_KEYS or SECRET_KEY_FALLBACKS) and run again; nothing was changed"
            )
        with transaction.atomic():
            clusters = list(Cluster.objects.select_for_update())
            for cluster in clusters:
                cluster.save(update_fields=SECRETS)
        self.stdout.write(self.style.SUCCESS(f"re-encrypted the credentials of {len(clusters)} cluster(s)"))
