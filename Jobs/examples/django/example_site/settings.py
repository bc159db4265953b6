"""Settings of the example Django project: a real Django + django-allauth site that the
tests migrate and purge. An example only: the secret key is fixed and public.

LIFECYCLE_DJANGO_DB     a path to a SQLite file, or a PostgreSQL URL
                        postgres://user:pass@host:port/db?sslmode=disable&host=/socket/dir
                        (of the query only `host`, a unix-socket directory that replaces the
                        URL's host, `port` where the URL has none, and `sslmode` are used;
                        others, such as pool=2 or connect_timeout=30, are ignored)
LIFECYCLE_DJANGO_MEDIA  the media folder (MEDIA_ROOT): the blob store, so a FileField's
                        stored name is the blob's key
LIFECYCLE_API_URL       where `lifecycle serve` listens (http://127.0.0.1:8080), and
LIFECYCLE_API_TOKEN     its API token: every sign-in asks it to restore a pending deletion
                        (blog/lifecycle_restore.py); unset, sign-ins fail
"""
import os
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = "lifecycle-django-fixture-not-a-secret-3f9c1e6a0b7d4e2f8a5c9d1b"
DEBUG = False
ALLOWED_HOSTS = ["localhost", "127.0.0.1"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.github",
    "blog",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "allauth.account.middleware.AccountMiddleware",
]

ROOT_URLCONF = "example_site.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]

# Django's PBKDF2 (pbkdf2_sha256$iterations$salt$hash), with fewer iterations (hashers.py).
PASSWORD_HASHERS = ["example_site.hashers.FixturePBKDF2PasswordHasher"]


def _database_from_environment():
    value = os.environ.get("LIFECYCLE_DJANGO_DB", "")
    if not value:
        raise ImproperlyConfigured(
            "LIFECYCLE_DJANGO_DB must name a SQLite file or a postgres:// URL"
        )
    scheme = value.split("://", 1)[0].lower() if "://" in value else ""
    if scheme in ("postgres", "postgresql"):
        url = urlsplit(value)
        query = parse_qs(url.query, keep_blank_values=True)
        # A unix-socket directory in the query (libpq's host=) wins over the URL's host.
        host = query["host"][-1] if query.get("host") else unquote(url.hostname or "")
        options = {}
        if query.get("sslmode"):
            options["sslmode"] = query["sslmode"][-1]
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(url.path.lstrip("/")),
            "USER": unquote(url.username or ""),
            "PASSWORD": unquote(url.password or ""),
            "HOST": host,
            "PORT": str(url.port or (query["port"][-1] if query.get("port") else "")),
            "OPTIONS": options,
        }
    if scheme:
        raise ImproperlyConfigured(f"LIFECYCLE_DJANGO_DB: unsupported scheme {scheme!r}")
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(Path(value).expanduser().absolute()),
    }


DATABASES = {"default": _database_from_environment()}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_media = os.environ.get("LIFECYCLE_DJANGO_MEDIA", "")
MEDIA_ROOT = str(Path(_media).expanduser().absolute()) if _media else ""
MEDIA_URL = "/media/"
STATIC_URL = "/static/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

ACCOUNT_EMAIL_VERIFICATION = "optional"

LIFECYCLE_API_URL = os.environ.get("LIFECYCLE_API_URL", "")
LIFECYCLE_API_TOKEN = os.environ.get("LIFECYCLE_API_TOKEN", "")
