"""Signing in again restores an account whose deletion is pending: the few lines a Django
app adds (Jobs/README.md, "Signing in again restores"). On every successful sign-in, ask
lifecycle's app API to restore the account; 409 means there was nothing to restore (no
deletion pending). Any other failure fails the sign-in: a user who signed in must never be
purged afterwards because the restore was not heard."""
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
        if error.code != 409:
            raise
