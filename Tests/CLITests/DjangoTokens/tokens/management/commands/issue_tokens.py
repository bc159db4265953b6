"""Issues API tokens the way a site's sign-in endpoints do, through the libraries' own
APIs: a simplejwt refresh token (RefreshToken.for_user, which records its OutstandingToken)
and a knox token (AuthToken.objects.create) for each user named; for each user, one more
refresh token that is blacklisted at once, as simplejwt's own sign-out leaves one. Prints
{"USERNAME": {"id", "refresh", "knox", "blacklisted_refresh"}} as JSON."""
import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from knox.models import AuthToken
from rest_framework_simplejwt.tokens import RefreshToken


class Command(BaseCommand):
    help = "Issue a refresh token, a blacklisted refresh token and a knox token to each user named."

    def add_arguments(self, parser):
        parser.add_argument("usernames", nargs="+")

    def handle(self, *args, **options):
        issued = {}
        for username in options["usernames"]:
            user = get_user_model().objects.get(username=username)
            signed_out = RefreshToken.for_user(user)
            signed_out.blacklist()
            _, knox_token = AuthToken.objects.create(user)
            issued[username] = {
                "id": user.pk,
                "refresh": str(RefreshToken.for_user(user)),
                "knox": knox_token,
                "blacklisted_refresh": str(signed_out),
            }
        self.stdout.write(json.dumps(issued))
