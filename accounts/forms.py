"""The account page's form for a new API token."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

LIFETIMES = [1, 7, 30, 90, 365]


class NewTokenForm(forms.Form):
    name = forms.CharField(max_length=64, help_text="What will use it, e.g. 'ci' or 'laptop'.")
    days = forms.TypedChoiceField(
        coerce=int, label="Expires after", choices=[(days, f"{days} days") for days in LIFETIMES]
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Offers only lifetimes up to API_TOKEN_MAX_DAYS, API_TOKEN_DAYS first chosen."""
        super().__init__(*args, **kwargs)
        allowed = [(days, label) for days, label in self.fields["days"].choices if days <= settings.API_TOKEN_MAX_DAYS]
        self.fields["days"].choices = allowed
        self.fields["days"].initial = settings.API_TOKEN_DAYS
