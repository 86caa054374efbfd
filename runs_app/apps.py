from django.apps import AppConfig


class RunsAppConfig(AppConfig):
    """Batch inference: Krateo InferenceConfig and InferenceRun mirrors."""

    name = "runs_app"
    verbose_name = "Inference runs"

    def ready(self) -> None:
        from clusters.controllers import register_controller
        from runs_app.controller import reconcile_inference_run

        register_controller("InferenceRun", reconcile_inference_run)
