"""Signing in again restores an account whose deletion is pending: the few lines a Django
app adds (Jobs/README.md, "Signing in again restores"). On every successful sign-in, ask
lifecycle's app API to restore the account; a 409 with code `not_pending` means there was
nothing to restore. Any other answer fails the sign-in (a purge under way, the grace period
over, lifecycle unreachable): a user who signed in must never be purged afterwards because
the restore was not heard."""
import json
import os
import urllib.error
import urllib.request

from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver


@receiver(user_logged_in)
def restore_pending_deletion(sender, request, user, **kwargs):
    base = os.environ.get("LIFECYCLE_API_URL")
    if not base:
        return
    restore = urllib.request.Request(
        f"{base}/v1/accounts/{user.pk}/restore", method="POST",
        headers={"Authorization": f"Bearer {os.environ['LIFECYCLE_API_TOKEN']}"},
    )
    try:
        urllib.request.urlopen(restore, timeout=10).close()
    except urllib.error.HTTPError as error:
        if error.code != 409 or json.load(error).get("code") != "not_pending":
            raise
