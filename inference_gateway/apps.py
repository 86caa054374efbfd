from django.apps import AppConfig


class InferenceGatewayConfig(AppConfig):
    """The request path: an OpenAI-compatible gateway in front of every serving kind the portal mirrors."""

    name = "inference_gateway"
    verbose_name = "Inference gateway"

    def ready(self) -> None:
        """Hand the placement rules down to the serving models' write paths, which check them
        (``models_app.gateway_rules``: the gateway sits above ``models_app``, docs/architecture.md)."""
        from inference_gateway.addresses import written_port
        from inference_gateway.picking.config import annotation_errors
        from inference_gateway.placement import backend_url_errors, gateway_id, gateway_id_errors
        from models_app.public import GatewayRules, register_gateway_rules

        register_gateway_rules(GatewayRules(backend_url_errors, gateway_id, gateway_id_errors, written_port,
                                            annotation_errors))
