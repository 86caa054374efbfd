from django.apps import AppConfig


class ModelsAppConfig(AppConfig):
    """Serving models: InferenceModel, KubeAI Model and llm-d ModelService mirrors."""

    name = "models_app"
    verbose_name = "Serving models"
