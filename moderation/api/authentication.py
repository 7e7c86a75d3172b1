"""`Authorization: Bearer <token>` for API clients created with `manage.py create_api_client`."""

from __future__ import annotations

from rest_framework import authentication, exceptions

from moderation.services import api_client_authenticate


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            # Not "no credentials": the client sent some, in a scheme this API does not take.
            raise exceptions.NotAuthenticated(
                f"This API takes `Authorization: Bearer <token>`, not the {scheme[:20]!r} scheme.")
        token = token.strip()
        if not token or " " in token:
            raise exceptions.AuthenticationFailed("Malformed bearer token.")
        client = api_client_authenticate(token)
        if client is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return client, token

    def authenticate_header(self, request) -> str:
        # Makes DRF answer 401 (with WWW-Authenticate) rather than 403 to anonymous requests.
        return f'{self.keyword} realm="api"'
