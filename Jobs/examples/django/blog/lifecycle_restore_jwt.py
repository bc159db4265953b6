"""Signing in for API tokens restores too. djangorestframework-simplejwt's sign-in
(TokenObtainPairView) checks the password with authenticate() and never calls login(), so
Django's user_logged_in, and with it blog/lifecycle_restore.py's receiver, does not run: a
user pending deletion would get tokens, use the app, and be purged unheard. This serializer
asks lifecycle before any token is made; set it in the site's settings:

    SIMPLE_JWT = {"TOKEN_OBTAIN_SERIALIZER": "blog.lifecycle_restore_jwt.RestoringTokenObtainPairSerializer"}

A refused restore (a purge under way, the grace period over, lifecycle unreachable) answers
401 with the reason, and no token, outstanding or not, is recorded. Import this module only
on a site that installs simplejwt."""
from django.core.exceptions import ImproperlyConfigured
from rest_framework import exceptions
from rest_framework_simplejwt.serializers import TokenObtainPairSerializer

from blog.lifecycle_restore import RestoreRefused, restore_sign_in


class RestoringTokenObtainPairSerializer(TokenObtainPairSerializer):
    @classmethod
    def get_token(cls, user):
        # Called once the password is checked, before the refresh token (and its
        # OutstandingToken row) exists.
        try:
            restore_sign_in(user)
        except (RestoreRefused, ImproperlyConfigured) as refused:
            raise exceptions.AuthenticationFailed(f"sign-in refused: {refused}") from None
        return super().get_token(user)
