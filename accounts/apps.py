from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Teams, their namespace grants and the one queryset restriction every page and API uses."""

    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Known devices follow every password login, whichever view or endpoint it came through;
        the ready-made groups come back after a ``flush``."""
        from django.contrib.auth.signals import user_logged_in, user_login_failed
        from django.db.models.signals import post_migrate

        from accounts.devices import count_device_failure, remember_device
        from accounts.ready_made_groups import ensure_after_migrate

        user_logged_in.connect(remember_device, dispatch_uid="accounts.remember_device")
        user_login_failed.connect(count_device_failure, dispatch_uid="accounts.count_device_failure")
        post_migrate.connect(ensure_after_migrate, sender=self, dispatch_uid="accounts.ready_made_groups")
