"""Rate limits: per API client, and per provider and address on the callback endpoint.

Counts live in the default cache: Redis when REDIS_URL is set (shared by every process), else
each process's memory (a per-process limit: set REDIS_URL in production).
"""

from __future__ import annotations

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle


class _SettingsRate(SimpleRateThrottle):
    setting = ""

    def get_rate(self):  # read at request time, so configuration (and tests) can change it
        return getattr(settings, self.setting)


class ClientRateThrottle(_SettingsRate):
    scope = "client"
    setting = "THROTTLE_CLIENT_RATE"

    def get_cache_key(self, request, view):
        principal = getattr(request.user, "pk", None)
        if principal is None:
            return None  # not authenticated: refused before it could cost anything
        kind = "user" if hasattr(request.user, "is_staff") else "client"  # staff on the timeline API
        return self.cache_format % {"scope": self.scope, "ident": f"{kind}-{principal}"}


class CallbackRateThrottle(_SettingsRate):
    scope = "callbacks"
    setting = "THROTTLE_CALLBACK_RATE"

    def get_cache_key(self, request, view):
        ident = f"{view.kwargs.get('provider', '')}:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class AddressRateThrottle(_SettingsRate):
    """For endpoints anyone may call (schema, docs): per address."""

    scope = "address"
    setting = "THROTTLE_ADDRESS_RATE"

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
