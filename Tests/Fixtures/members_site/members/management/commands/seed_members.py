"""Seeds ada, bob and cy through the ORM: avatars and documents (files), teams (ada leads
one, both others are members), shares of each other's documents, pins on ada's document
(bob's), notes about each member (a generic relation), an invoice each, and bob as
ada's reviewer, a studio each for ada and bob (a place row each, by multi-table
inheritance). Prints the users' ids as JSON."""
import json

from django.core.files.base import ContentFile
from django.core.management.base import BaseCommand
from django.db import transaction

from members.models import Document, Invoice, Member, Note, Pin, Place, Share, Studio, Team


class Command(BaseCommand):
    def handle(self, *args, **options):
        with transaction.atomic():
            users = {}
            for name in ("ada", "bob", "cy"):
                user = Member.objects.create_user(username=name, email="%s@example.com" % name, password="secret %s" % name)
                user.avatar.save("%s.png" % name, ContentFile(("avatar of %s" % name).encode()), save=True)
                users[name] = user
                Note.objects.create(about=user, text="a note about %s" % name)
                Invoice.objects.create(member=user, amount=100)
            engines = Team.objects.create(name="engines", lead=users["ada"])
            engines.members.set([users["ada"], users["bob"]])
            looms = Team.objects.create(name="looms", lead=users["bob"])
            looms.members.set([users["bob"], users["cy"]])
            documents = {}
            for name, user in users.items():
                document = Document(owner=user, title="%s's notes" % name, reviewer=users["bob"] if name == "ada" else users["ada"])
                document.file.save("%s.txt" % name, ContentFile(("notes by %s" % name).encode()), save=True)
                documents[name] = document
            Share.objects.create(document=documents["ada"], member=users["bob"])
            Share.objects.create(document=documents["bob"], member=users["ada"])
            Share.objects.create(document=documents["cy"], member=users["bob"])
            Pin.objects.create(document=documents["ada"], label="bob's pin on ada's notes")
            Pin.objects.create(document=documents["cy"], label="bob's pin on cy's notes")
            Studio.objects.create(owner=users["ada"], name="ada's studio")
            Studio.objects.create(owner=users["bob"], name="bob's studio")
            Place.objects.create(name="a place nobody owns")
        print(json.dumps({"users": {name: user.pk for name, user in users.items()}}))
