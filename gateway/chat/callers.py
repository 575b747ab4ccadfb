"""Who a WebSocket client is: a logged-in web user (billed to their team) or an API key."""

from asgiref.sync import sync_to_async
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from gateway.accounts.models import Membership
from gateway.api.admission import Caller


def _first_team_id(user_id: int) -> int | None:
    membership = Membership.objects.filter(user_id=user_id).order_by("role", "team__name").first()
    return None if membership is None else membership.team_id


async def caller_for_user(user: AbstractBaseUser | AnonymousUser | None) -> Caller | None:
    """The user's first team (admins' teams first); None if anonymous or in no team."""
    if user is None or not user.is_authenticated or user.pk is None:
        return None
    team_id = await sync_to_async(_first_team_id)(int(user.pk))
    return None if team_id is None else Caller(team_id=team_id)
