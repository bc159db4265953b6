"""The example Django site (Jobs/examples/django: its blog, allauth, sessions, users) with
the API token libraries real Django backends sign in with: djangorestframework,
djangorestframework-simplejwt with its blacklist app, and django-rest-knox. Test only:
DjangoTokenTests migrates it for real and issues tokens through the libraries' own APIs.
The example's folder is on PYTHONPATH (DjangoTokenTests sets it)."""
from example_site.settings import *  # noqa: F401,F403

INSTALLED_APPS = INSTALLED_APPS + [  # noqa: F405
    "rest_framework",
    "rest_framework_simplejwt",
    "rest_framework_simplejwt.token_blacklist",
    "knox",
    "tokens",
]

# Django's test RequestFactory names the host "testserver".
ALLOWED_HOSTS = ALLOWED_HOSTS + ["testserver"]  # noqa: F405

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "knox.auth.TokenAuthentication",
        "rest_framework_simplejwt.authentication.JWTAuthentication",
    ],
}

# A sign-in for tokens restores an account pending deletion, as a session sign-in does
# (the example's blog/lifecycle_restore_jwt.py).
SIMPLE_JWT = {"TOKEN_OBTAIN_SERIALIZER": "blog.lifecycle_restore_jwt.RestoringTokenObtainPairSerializer"}
