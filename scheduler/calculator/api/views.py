"""Calculator API: the memory estimate with GPUs per type and pools, and the model presets."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.public import visible_cluster_ids
from scheduler.calculator.answer import answer, answer_to_dict
from scheduler.calculator.api.serializers import CalculatorRequestSerializer, PresetSerializer
from scheduler.calculator.presets import all_presets


class CalculatorView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        request=CalculatorRequestSerializer,
        responses={200: OpenApiTypes.OBJECT},
        summary="Model memory, GPUs per GPU type and the pools that can hold it now",
    )
    def post(self, request: Request) -> Response:
        serializer = CalculatorRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = answer(serializer.to_estimate_kwargs(), serializer.chosen_preset, visible_cluster_ids(request.user))
        return Response(answer_to_dict(result))


class PresetsView(APIView):
    """Static data from the repository, so any logged-in user may read it."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: PresetSerializer(many=True)}, summary="Calculator presets of popular open models")
    def get(self, request: Request) -> Response:
        return Response(PresetSerializer(all_presets(), many=True).data)
