"""Re-encrypt every stored credential with the current first key (the rotation step).

Every encrypted column of every installed model is covered (the clusters' credentials, and any app's,
such as gitops' forge tokens), found by the field's class rather than named here, so a credential
added later rotates too. The encrypted-field library gives an undecryptable value back as its
ciphertext instead of failing, so each stored value is first checked against the configured keys:
if one no longer decrypts (its key was dropped too early), nothing is written and the command names it.
"""

from __future__ import annotations

from typing import Any

from cryptography.fernet import InvalidToken
from django.apps import apps
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.db.models import F, Model, TextField
from django.db.models.functions import Cast
from encrypted_fields.fields import EncryptedFieldMixin


def encrypted_columns() -> list[tuple[type[Model], list[str]]]:
    """Each installed model with encrypted fields, and their names."""
    found = []
    for model in apps.get_models():
        names = [field.name for field in model._meta.concrete_fields if isinstance(field, EncryptedFieldMixin)]
        if names:
            found.append((model, names))
    return found


class Command(BaseCommand):
    help = "Re-encrypt stored credentials with the first of FIELD_ENCRYPTION_KEYS / SECRET_KEY (after a rotation)."

    def handle(self, *args: Any, **options: Any) -> None:
        columns = encrypted_columns()
        undecryptable = []
        for model, secrets in columns:
            raw = model.objects.values_list("pk", *(Cast(F(name), TextField()) for name in secrets))
            for pk, *values in raw:
                for field, value in zip(secrets, values, strict=True):
                    try:
                        if value:
                            model._meta.get_field(field).f.decrypt(value.encode())
                    except InvalidToken:
                        undecryptable.append(f"{_label(model, pk)}.{field}")
        if undecryptable:
            raise CommandError(
                "no configured key decrypts " + ", ".join(undecryptable) + ": put the old key back "
                "(FIELD_ENCRYPTION_KEYS or SECRET_KEY_FALLBACKS) and run again; nothing was changed"
            )
        rows = 0
        with transaction.atomic():
            for model, secrets in columns:
                for row in model.objects.select_for_update():
                    row.save(update_fields=secrets)
                    rows += 1
        self.stdout.write(self.style.SUCCESS(f"re-encrypted the credentials of {rows} row(s)"))


def _label(model: type[Model], pk: Any) -> str:
    """A cluster by its name (what staff know it by), any other row as ``app.Model#pk``."""
    name = model.objects.filter(pk=pk).values_list("name", flat=True).first() if _has_name(model) else None
    return name or f"{model._meta.label}#{pk}"


def _has_name(model: type[Model]) -> bool:
    return any(field.name == "name" for field in model._meta.concrete_fields)
