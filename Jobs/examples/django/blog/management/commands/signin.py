"""Signs in with a username and a password through Django's test client, as the site's
login would (authenticate, login, the user_logged_in signal); prints the new session's key,
or exits 1 when Django refuses the sign-in: a wrong password or a user who is gone, or the
lifecycle receiver failing it (where a site's view would answer 500, no session saved)."""
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError
from django.test import Client

from blog.lifecycle_restore import RestoreRefused


class Command(BaseCommand):
    help = "Sign in as a user; print the session key."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("password")

    def handle(self, *args, **options):
        client = Client()
        try:
            signed_in = client.login(username=options["username"], password=options["password"])
        except (RestoreRefused, ImproperlyConfigured) as error:
            raise CommandError(f"sign-in failed: {error}")
        if not signed_in:
            raise CommandError("sign-in refused")
        self.stdout.write(client.session.session_key)
