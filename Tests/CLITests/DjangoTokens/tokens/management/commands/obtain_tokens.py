"""Signs in for tokens as a site's /api/token/ endpoint would: a POST of the username and
password to simplejwt's TokenObtainPairView, with the site's SIMPLE_JWT settings. Prints
{"status": STATUS, "detail": ..., "refresh": bool} as JSON."""
import json

from django.core.management.base import BaseCommand
from rest_framework.test import APIRequestFactory
from rest_framework_simplejwt.views import TokenObtainPairView


class Command(BaseCommand):
    help = "Sign in for a token pair through simplejwt's own view; print its answer as JSON."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("password")

    def handle(self, *args, **options):
        answer = TokenObtainPairView.as_view()(APIRequestFactory().post(
            "/api/token/", {"username": options["username"], "password": options["password"]}, format="json"))
        self.stdout.write(json.dumps({
            "status": answer.status_code,
            "detail": str(answer.data.get("detail", "")),
            "refresh": "refresh" in answer.data,
        }))
