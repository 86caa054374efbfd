"""Manifest-shaped serializers for configs and runs."""

from clusters.web.api.serializers import manifest_serializer_for
from runs_app.models import InferenceConfig, InferenceRun

InferenceConfigSerializer = manifest_serializer_for(InferenceConfig)
InferenceRunSerializer = manifest_serializer_for(InferenceRun)
