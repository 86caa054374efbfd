from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Teams, their namespace grants and the one queryset restriction every page and API uses."""

    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"
