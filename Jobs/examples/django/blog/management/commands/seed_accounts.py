"""Seeds a freshly migrated database with three accounts (ada, bob, cy) and everything a
real app keeps about them, through Django's and allauth's own APIs, and prints a JSON
object on stdout: the users' ids, the sessions' keys, the rows made and every file written
(its storage name, which is its key in the media folder). Run on a fresh database: it does
not look for rows of an earlier run."""
import io
import json
from datetime import timedelta

from allauth.account.models import EmailAddress
from allauth.socialaccount.models import SocialAccount, SocialApp, SocialToken
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model, login
from django.contrib.auth.signals import user_logged_in
from django.contrib.sessions.backends.db import SessionStore
from django.core.files.base import ContentFile
from django.core.management.base import BaseCommand, CommandError
from django.conf import settings
from django.db import transaction
from django.test import RequestFactory
from django.utils import timezone

from blog.lifecycle_restore import restore_pending_deletion
from PIL import Image

from blog.models import Attachment, Comment, Follow, Message, Post, Profile

ALLAUTH_BACKEND = "allauth.account.auth_backends.AuthenticationBackend"
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


class Command(BaseCommand):
    help = "Seed a fresh database with the accounts ada, bob and cy; print what was made as JSON."

    def handle(self, *args, **options):
        if not settings.MEDIA_ROOT:
            raise CommandError("LIFECYCLE_DJANGO_MEDIA must name the media folder")
        files = []

        def save_file(field_file, name, content, owner, table, column, row):
            # Through the FileField, so the stored name is Django's (upload_to, and a
            # random suffix when the name is taken).
            field_file.save(name, ContentFile(content), save=True)
            files.append({
                "name": field_file.name,
                "owner": owner,
                "table": table,
                "column": column,
                "row_id": row.pk,
                "size": len(content),
            })

        with transaction.atomic():
            User = get_user_model()
            ada = User.objects.create_user(
                "ada", "ada@example.com", "correct horse",
                first_name="Ada", last_name="Lovelace", is_staff=True, is_superuser=True,
            )
            bob = User.objects.create_user(
                "bob", "bob@example.com", "battery staple",
                first_name="Bob", last_name="Babbage", is_staff=True,
            )
            # No password: Django stores an unusable one ("!" and 40 random characters).
            cy = User.objects.create_user("cy", "cy@example.com", None, first_name="Cy")
            users = {"ada": ada, "bob": bob, "cy": cy}

            for user in users.values():
                EmailAddress.objects.create(user=user, email=user.email, primary=True, verified=True)

            github = SocialApp.objects.create(
                provider="github", name="GitHub", client_id="fixture-client-id", secret="fixture-client-secret",
            )
            ada_github = SocialAccount.objects.create(
                user=ada, provider="github", uid="1815",
                extra_data={"id": 1815, "login": "ada", "name": "Ada Lovelace", "email": "ada@example.com"},
                last_login=timezone.now(),
            )
            SocialToken.objects.create(
                app=github, account=ada_github, token="gho_fixtureAccessTokenForAda", token_secret="",
                expires_at=timezone.now() + timedelta(hours=8),
            )

            # Sessions as a login makes them: django.contrib.auth.login on a request
            # (it also sets last_login), saved by the session store as the middleware would.
            # The seed comes before lifecycle is installed, so nothing can be pending yet:
            # lifecycle's sign-in receiver is left out of these logins rather than asked.
            factory = RequestFactory()
            sessions = {}
            user_logged_in.disconnect(restore_pending_deletion)
            try:
                for name, backend in (("ada", ALLAUTH_BACKEND), ("bob", MODEL_BACKEND)):
                    request = factory.get("/accounts/login/")
                    request.session = SessionStore()
                    login(request, users[name], backend=backend)
                    request.session.save()
                    sessions[name] = request.session.session_key
            finally:
                user_logged_in.connect(restore_pending_deletion)

            ada_post = Post.objects.create(author=ada, title="Notes on the engine", body="The engine weaves algebraic patterns.")
            save_file(ada_post.cover, "cover.png", b"ada's cover for the engine notes\n", "ada", "blog_post", "cover", ada_post)
            ada_post_bare = Post.objects.create(author=ada, title="A post without a cover", body="No picture here.")
            bob_post = Post.objects.create(author=bob, title="Difference engines", body="On tables of logarithms.")
            # The same upload name again: Django stores it under a suffixed name.
            save_file(bob_post.cover, "cover.png", b"bob's cover for difference engines\n", "bob", "blog_post", "cover", bob_post)
            cy_post = Post.objects.create(author=cy, title="Hello", body="First post.")
            save_file(cy_post.cover, "hello.jpg", b"cy's cover\n", "cy", "blog_post", "cover", cy_post)

            bob_on_ada = Comment.objects.create(post=ada_post, author=bob, body="Bob: see my attached table.")
            attachment = Attachment(comment=bob_on_ada)
            save_file(attachment.file, "table.csv", b"n,log10(n)\n2,0.30103\n", "bob", "blog_attachment", "file", attachment)
            cy_on_ada = Comment.objects.create(post=ada_post, author=cy, body="Cy: lovely.")
            ada_on_bob = Comment.objects.create(post=bob_post, author=ada, body="Ada: and the analytical engine?")
            ada_on_cy = Comment.objects.create(post=cy_post, author=ada, body="Ada: welcome!")
            bob_on_cy = Comment.objects.create(post=cy_post, author=bob, body="Bob: welcome too.")

            Follow.objects.create(follower=ada, followee=bob)
            Follow.objects.create(follower=bob, followee=ada)
            Follow.objects.create(follower=cy, followee=ada)
            Follow.objects.create(follower=bob, followee=cy)

            # Direct messages both ways: each is its sender's and its recipient's.
            messages = {
                "ada_to_bob": Message.objects.create(sender=ada, recipient=bob, body="Ada: the notes are ready.").pk,
                "bob_to_ada": Message.objects.create(sender=bob, recipient=ada, body="Bob: splendid.").pk,
                "bob_to_cy": Message.objects.create(sender=bob, recipient=cy, body="Bob: hello Cy.").pk,
            }

            # Avatars are images (an ImageField); cy has none ("", Django's "no file").
            colours = {"ada": (180, 40, 60), "bob": (40, 90, 180)}
            for name, bio in (("ada", "Mathematician."), ("bob", "Engineer."), ("cy", "")):
                profile = Profile.objects.create(user=users[name], bio=bio)
                if name in colours:
                    png = io.BytesIO()
                    Image.new("RGB", (16, 16), colours[name]).save(png, "PNG")
                    save_file(profile.avatar, f"{name}.png", png.getvalue(), name, "blog_profile", "avatar", profile)

            # The admin's history: bob changed ada's user, ada changed bob's post. Neither
            # names the object by a foreign key: content_type + object_id (text).
            bob_edits_ada = LogEntry.objects.log_actions(
                bob.pk, User.objects.filter(pk=ada.pk), CHANGE,
                [{"changed": {"fields": ["Email address"]}}], single_object=True,
            )
            ada_edits_bob_post = LogEntry.objects.log_actions(
                ada.pk, Post.objects.filter(pk=bob_post.pk), CHANGE,
                [{"changed": {"fields": ["Title"]}}], single_object=True,
            )

        result = {
            "users": {name: user.pk for name, user in users.items()},
            "sessions": sessions,
            "social": {"app_id": github.pk, "ada_account_id": ada_github.pk},
            "posts": {
                "ada_with_cover": ada_post.pk,
                "ada_without_cover": ada_post_bare.pk,
                "bob": bob_post.pk,
                "cy": cy_post.pk,
            },
            "comments": {
                "bob_on_ada": bob_on_ada.pk,
                "cy_on_ada": cy_on_ada.pk,
                "ada_on_bob": ada_on_bob.pk,
                "ada_on_cy": ada_on_cy.pk,
                "bob_on_cy": bob_on_cy.pk,
            },
            "attachment": attachment.pk,
            "messages": messages,
            "admin_log": {"bob_edits_ada": bob_edits_ada.pk, "ada_edits_bob_post": ada_edits_bob_post.pk},
            "media_root": str(settings.MEDIA_ROOT),
            "files": files,
            "file_names": [entry["name"] for entry in files],
        }
        self.stdout.write(json.dumps(result, indent=2))
