"""Django's own apps and `members`, whose Member is AUTH_USER_MODEL; the database as the
example project reads LIFECYCLE_DJANGO_DB (a SQLite file or a postgres:// URL)."""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "Jobs" / "examples" / "django"))
from example_site.settings import _database_from_environment  # noqa: E402

SECRET_KEY = "members-fixture-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["localhost", "testserver"]
ROOT_URLCONF = "members_site.urls"
DATABASES = {"default": _database_from_environment()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "members.Member"
_media = os.environ.get("LIFECYCLE_DJANGO_MEDIA", "")
MEDIA_ROOT = str(Path(_media).expanduser().absolute()) if _media else ""
MEDIA_URL = "/media/"
STATIC_URL = "/static/"
USE_TZ = True
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "members",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
