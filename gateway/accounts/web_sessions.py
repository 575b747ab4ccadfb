"""Whether a web login is still the one a long-lived connection opened with."""

from importlib import import_module

from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.utils.crypto import constant_time_compare


def session_is_current(user_id: int, session_key: str) -> bool:
    """The session still exists, is this user's, and was made with the user's present
    password: what Django checks on every page, for a chat socket's every message (a
    socket outlives the page that opened it). Signing out deletes the session; changing
    the password changes the auth hash the session holds a copy of."""
    session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    data = session.load()  # {} once it is deleted (signed out) or expired
    if str(data.get(SESSION_KEY)) != str(user_id):
        return False
    user = get_user_model().objects.filter(pk=user_id).first()
    stored = data.get(HASH_SESSION_KEY)
    return (
        user is not None
        and isinstance(stored, str)
        and constant_time_compare(stored, user.get_session_auth_hash())
    )
