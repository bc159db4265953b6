"""Signs in with a username and a password through Django's test client, as the site's
login would (authenticate, login, the user_logged_in signal); prints the new session's key,
or exits 1 when Django refuses the sign-in."""
from django.core.management.base import BaseCommand, CommandError
from django.test import Client


class Command(BaseCommand):
    help = "Sign in as a user; print the session key."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("password")

    def handle(self, *args, **options):
        client = Client()
        if not client.login(username=options["username"], password=options["password"]):
            raise CommandError("sign-in refused")
        self.stdout.write(client.session.session_key)
