from django.apps import AppConfig


class RunsAppConfig(AppConfig):
    """Batch inference: Krateo InferenceConfig and InferenceRun mirrors."""

    name = "runs_app"
    verbose_name = "Inference runs"
