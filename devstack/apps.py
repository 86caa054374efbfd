from django.apps import AppConfig


class DevstackConfig(AppConfig):
    """The local stack of ``make run``: a real control plane, a demo model server, the live demo."""

    name = "devstack"
    verbose_name = "Local development stack"
