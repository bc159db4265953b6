"""Signing in again restores an account whose deletion is pending: the few lines a Django
app adds (Jobs/README.md, "Signing in again restores"). On every successful sign-in, ask
lifecycle's app API (`lifecycle serve`) to restore the account. The API answers errors as
{"error": {"code": ..., "message": ...}}; a 409 with code `not_pending` means there was
nothing to restore. Any other answer fails the sign-in (a purge under way, the grace period
over, lifecycle unreachable or not configured): a user who signed in must never be purged
afterwards because the restore was not heard.

The new session's key goes with the call: a deletion request later signs the user out by
reading her sessions, not every row of `django_session` (whose rows name their user only
inside the encoded `session_data`).

Settings: LIFECYCLE_API_URL (where `lifecycle serve` listens, e.g. http://127.0.0.1:8080)
and LIFECYCLE_API_TOKEN (its API token); the example's settings.py reads both from the
environment. Unset, every sign-in fails, and `manage.py check` warns (lifecycle.W001)."""
import json
import urllib.error
import urllib.request

from django.conf import settings
from django.contrib.auth.signals import user_logged_in
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.dispatch import receiver


class RestoreRefused(Exception):
    """The sign-in must not go through: lifecycle refused the restore, or could not be asked.
    Raised inside `login()`, before the session is saved, so the user is not signed in."""


def _configuration():
    base = getattr(settings, "LIFECYCLE_API_URL", "") or ""
    token = getattr(settings, "LIFECYCLE_API_TOKEN", "") or ""
    missing = [name for name, value in (("LIFECYCLE_API_URL", base), ("LIFECYCLE_API_TOKEN", token)) if not value]
    return base.rstrip("/"), token, missing


@checks.register("lifecycle")
def lifecycle_api_configured(app_configs, **kwargs):
    # A warning, not an error: migrate and the other management commands of a site whose
    # API is set only where it serves must still run. Deploy scripts: check --fail-level WARNING.
    _, _, missing = _configuration()
    if not missing:
        return []
    return [checks.Warning(
        f"{' and '.join(missing)} not set: every sign-in will fail, since a user pending "
        "deletion who signs in must be restored in lifecycle",
        hint="set LIFECYCLE_API_URL to where `lifecycle serve` listens and LIFECYCLE_API_TOKEN "
             "to its API token (docs/walkthroughs.md, \"Walk-through: a Django project\")",
        id="lifecycle.W001",
    )]


@receiver(user_logged_in)
def restore_pending_deletion(sender, request, user, **kwargs):
    session = getattr(request, "session", None)
    key = session.session_key if session is not None else None
    restore_sign_in(user, key)
    if session is not None and key is None:
        # login() flushed another user's session: the new key comes with its first save,
        # made only now that the sign-in is allowed, and is reported on its own.
        session.save()
        restore_sign_in(user, session.session_key)


def restore_sign_in(user, session_key=None):
    """Asks lifecycle to restore `user`, who has just proved who she is; raises unless the
    sign-in may go on. For sign-ins that do not pass through login() (an API token issued
    for a password: blog/lifecycle_restore_jwt.py)."""
    base, token, missing = _configuration()
    if missing:
        raise ImproperlyConfigured(
            f"{' and '.join(missing)} not set: the sign-in of user {user.pk} cannot restore a pending "
            "deletion, so it is refused; set them to `lifecycle serve`'s address and API token")
    _restore(base, token, user, session_key)


def _restore(base, token, user, session_key):
    body = {"session_key": session_key} if session_key else {}
    restore = urllib.request.Request(
        f"{base}/v1/accounts/{user.pk}/restore", method="POST", data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        urllib.request.urlopen(restore, timeout=10).close()
    except urllib.error.HTTPError as answer:
        try:
            answered = json.load(answer)
        except ValueError:
            answered = None
        # Anything but the documented error object (a proxy's page, a JSON list) has no code.
        error = answered.get("error") if isinstance(answered, dict) else None
        error = error if isinstance(error, dict) else {}
        if answer.code == 409 and error.get("code") == "not_pending":
            return
        raise RestoreRefused(
            f"lifecycle answered {answer.code} ({error.get('code', 'no error code')}) to the restore of user "
            f"{user.pk}: {error.get('message', answer.reason)}") from None
    except OSError as failure:
        raise RestoreRefused(f"lifecycle at {base} could not be asked to restore user {user.pk}: {failure}") from None
