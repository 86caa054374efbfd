from django.apps import AppConfig


class ModelsAppConfig(AppConfig):
    """Serving models: InferenceModel, KubeAI Model and llm-d ModelService mirrors; the portal can control
    the first two (``models_app.controller``, ``models_app.kubeai_controller``)."""

    name = "models_app"
    verbose_name = "Serving models"

    def ready(self) -> None:
        from clusters.controller_registry import ChildKind, register_controller
        from clusters.kube.failures import register_warning_reasons
        from models_app import metrics
        from models_app.controller import FAILURES, FINALIZER, reconcile_inference_model, release_departed
        from models_app.kubeai_controller import CHILD_SELECTOR, reconcile_kubeai_model, release_departed_models
        from models_app.models import InferenceModel, KubeAIModel
        from models_app.preemption import register as register_preemptible

        metrics.register_collector()

        register_controller(
            "InferenceModel",
            reconcile_inference_model,
            children=(ChildKind("apps/v1", "Deployment", "inference.eh-ops.io/managed=true"),),
            sweep=release_departed,
            finalizer=FINALIZER,
        )
        register_warning_reasons("InferenceModel", FAILURES)
        register_controller(
            "Model",
            reconcile_kubeai_model,
            children=(ChildKind("apps/v1", "Deployment", CHILD_SELECTOR), ChildKind("v1", "Service", CHILD_SELECTOR)),
            sweep=release_departed_models,
        )
        register_warning_reasons("Model", FAILURES)
        register_preemptible(InferenceModel, reconcile_inference_model)
        register_preemptible(KubeAIModel, reconcile_kubeai_model)
