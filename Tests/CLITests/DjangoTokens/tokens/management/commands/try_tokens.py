"""Asks the libraries themselves whether tokens still work: a refresh token through
simplejwt's TokenRefreshView (POST, as the site's /api/token/refresh/ would get it) and a
knox token through a DRF view authenticated by knox's TokenAuthentication. Prints
{"refresh": STATUS, "refresh_detail": ..., "knox": STATUS, "knox_user": ID or null} as JSON:
200 when the token works, 401 when the library refuses it."""
import json

from django.core.management.base import BaseCommand
from knox.auth import TokenAuthentication
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView
from rest_framework_simplejwt.views import TokenRefreshView


class WhoAmI(APIView):
    authentication_classes = [TokenAuthentication]
    permission_classes = [IsAuthenticated]

    def get(self, request):
        return Response({"user": request.user.pk})


class Command(BaseCommand):
    help = "Try a refresh token (simplejwt) and a knox token; print each library's answer as JSON."

    def add_arguments(self, parser):
        parser.add_argument("refresh")
        parser.add_argument("knox")

    def handle(self, *args, **options):
        factory = APIRequestFactory()
        refreshed = TokenRefreshView.as_view()(
            factory.post("/api/token/refresh/", {"refresh": options["refresh"]}, format="json"))
        known = WhoAmI.as_view()(
            factory.get("/api/whoami/", HTTP_AUTHORIZATION="Token " + options["knox"]))
        self.stdout.write(json.dumps({
            "refresh": refreshed.status_code,
            "refresh_detail": str(refreshed.data.get("detail", "")),
            "refresh_gave_access": "access" in refreshed.data,
            "knox": known.status_code,
            "knox_user": known.data.get("user") if known.status_code == 200 else None,
        }))
