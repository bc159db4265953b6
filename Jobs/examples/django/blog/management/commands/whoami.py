"""Prints the id of the user a session key authenticates, as Django's own middleware would
decide it (the session row, its auth hash against the user's password, the user active),
or `anonymous`."""
from django.contrib.auth import get_user
from django.contrib.sessions.backends.db import SessionStore
from django.core.management.base import BaseCommand
from django.test import RequestFactory


class Command(BaseCommand):
    help = "Print whom a session authenticates."

    def add_arguments(self, parser):
        parser.add_argument("session_key")

    def handle(self, *args, **options):
        request = RequestFactory().get("/")
        request.session = SessionStore(session_key=options["session_key"])
        user = get_user(request)
        self.stdout.write(str(user.pk) if user.is_authenticated else "anonymous")
