"""Manifest-shaped serializers for the serving kinds."""

from clusters.web.api.serializers import manifest_serializer_for
from models_app.models import InferenceModel, KubeAIModel, ModelService

InferenceModelSerializer = manifest_serializer_for(InferenceModel)
KubeAIModelSerializer = manifest_serializer_for(KubeAIModel)
ModelServiceSerializer = manifest_serializer_for(ModelService)
