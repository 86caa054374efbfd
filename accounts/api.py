"""``POST /api/token/``: username and password in, a new named, expiring token out.

Never returns an existing key (only digests are stored, so it could not). Throttled (DRF scope
``token``) and locked out by the rule of the login form (``accounts.lockout``: per person, per
device from their known devices, per address only where it is a client's), as the credentials go
through ``authenticate(request=...)`` like the form's.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth.signals import user_logged_in
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import Throttled
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.lockout import AddressThrottle, PersonThrottle
from accounts.tokens import TokenLimitReached, issue_token


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField()
    password = serializers.CharField(style={"input_type": "password"}, trim_whitespace=False)
    name = serializers.CharField(max_length=64, default="api", help_text="What will use the token.")
    days = serializers.IntegerField(
        min_value=1, required=False, help_text="Lifetime in days (default API_TOKEN_DAYS, at most API_TOKEN_MAX_DAYS)."
    )

    def validate_days(self, days: int) -> int:
        if days > settings.API_TOKEN_MAX_DAYS:
            raise serializers.ValidationError(f"days: {days} must be at most {settings.API_TOKEN_MAX_DAYS}")
        return days

    def validate(self, attrs: dict) -> dict:
        request = self.context["request"]
        user = authenticate(request=request, username=attrs["username"], password=attrs["password"])
        if getattr(request, "axes_locked_out", False):
            raise Throttled(detail="too many failed logins for this user or from this address; try again later")
        if user is None:
            raise serializers.ValidationError("unable to log in with the given username and password")
        attrs["user"] = user
        return attrs


class ObtainTokenView(APIView):
    authentication_classes = []
    permission_classes = [AllowAny]
    throttle_classes = [PersonThrottle, AddressThrottle]
    throttle_scope = "token"

    @extend_schema(request=TokenRequestSerializer, responses={201: OpenApiTypes.OBJECT}, summary="New API token")
    def post(self, request: Request) -> Response:
        serializer = TokenRequestSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            token, key = issue_token(data["user"], data["name"], data.get("days"))
        except TokenLimitReached as refused:
            return Response({"detail": str(refused)}, status=status.HTTP_403_FORBIDDEN)
        # A password login like the form's: last_login is updated and axes forgets earlier failures.
        user_logged_in.send(sender=type(data["user"]), request=request, user=data["user"])
        return Response({"token": key, "name": token.name, "expiry": token.expiry}, status=status.HTTP_201_CREATED)
