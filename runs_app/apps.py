from django.apps import AppConfig


class RunsAppConfig(AppConfig):
    """Batch inference: Krateo InferenceConfig and InferenceRun mirrors."""

    name = "runs_app"
    verbose_name = "Inference runs"

    def ready(self) -> None:
        from clusters.controller_registry import ChildKind, register_controller
        from clusters.kube.failures import register_warning_reasons
        from runs_app.controller import FAILURES, JOB_LABEL, reconcile_inference_run

        register_controller(
            "InferenceRun", reconcile_inference_run, children=(ChildKind("batch/v1", "Job", JOB_LABEL),),
            reads=("InferenceConfig",),
        )
        register_warning_reasons("InferenceRun", FAILURES)
