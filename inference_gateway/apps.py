from django.apps import AppConfig


class InferenceGatewayConfig(AppConfig):
    """The request path: an OpenAI-compatible gateway in front of every serving kind the portal mirrors."""

    name = "inference_gateway"
    verbose_name = "Inference gateway"
