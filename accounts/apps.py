from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Teams, their namespace grants and the one queryset restriction every page and API uses."""

    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Known devices follow every password login, whichever view or endpoint it came through."""
        from django.contrib.auth.signals import user_logged_in, user_login_failed

        from accounts.devices import count_device_failure, remember_device

        user_logged_in.connect(remember_device, dispatch_uid="accounts.remember_device")
        user_login_failed.connect(count_device_failure, dispatch_uid="accounts.count_device_failure")
