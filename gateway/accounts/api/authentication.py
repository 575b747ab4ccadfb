"""DRF authentication by API key (scope `manage`), reusing the gateway's key path."""

from dataclasses import dataclass

from asgiref.sync import async_to_sync
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from foundation.redis_clients import RedisUnavailable
from gateway.accounts.authentication import (
    AuthenticationFailed,
    ScopeDenied,
    authenticate_key,
    bearer_token,
)
from gateway.accounts.keys import KEY_PREFIX
from gateway.accounts.models import ApiKey
from gateway.accounts.records import KeyRecord


class ServiceUnavailable(exceptions.APIException):
    status_code = 503
    default_detail = "A backing service is unreachable; try again shortly."
    default_code = "service_unavailable"


@dataclass(frozen=True)
class KeyPrincipal:
    """request.user for a request authenticated by a team's API key."""

    key: KeyRecord
    is_authenticated: bool = True
    is_superuser: bool = False

    @property
    def team_id(self) -> int:
        return self.key.team_id


class ApiKeyAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[KeyPrincipal, KeyRecord] | None:
        header = request.headers.get("Authorization")
        if not header or not header.lower().startswith("bearer "):
            return None
        try:
            token = bearer_token(header)
            if not token.startswith(KEY_PREFIX):
                raise AuthenticationFailed("Malformed API key.")
            record = async_to_sync(authenticate_key)(token, ApiKey.Scope.MANAGE)
        except AuthenticationFailed as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None
        except ScopeDenied as exc:
            raise exceptions.PermissionDenied(str(exc)) from None
        except RedisUnavailable as exc:
            raise ServiceUnavailable(str(exc)) from None
        return KeyPrincipal(record), record

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="sluice"'
