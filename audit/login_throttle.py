"""Throttled sign-in to the admin (django-axes; docs/operations.md, "Sign-in throttling").

Failed sign-ins are counted in PostgreSQL, so every web worker sees the same count: by account
and by address, each on its own. LOGIN_FAILURE_LIMIT failures of either within
LOGIN_COOLOFF_MIN minutes lock it until that long after the last one; while locked, the right
password is refused too. Each failure is a row staff read in the admin (Access failures,
Access attempts: deleting an attempt unlocks it) and a log line with the request's id.
"""

from __future__ import annotations

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_cool_off
from axes.models import AccessAttempt
from django.shortcuts import render
from rest_framework.throttling import BaseThrottle

LOCKED_TEMPLATE = "admin/login_locked.html"


def client_address(request) -> str:
    """The address a sign-in comes from, as the API's rate limits take it (NUM_PROXIES): a
    caller cannot choose another by sending X-Forwarded-For."""
    return BaseThrottle().get_ident(request)


def locked_response(request, original_response=None, credentials=None):
    """The page a locked-out sign-in gets: 429, saying why and for how long."""
    minutes = round(get_cool_off(request).total_seconds() / 60)
    return render(request, LOCKED_TEMPLATE, {"title": "Sign-in locked", "minutes": minutes}, status=429)


class LoginThrottle(AxesDatabaseHandler):
    def reset_user_attempts(self, request, credentials=None) -> int:
        """On a successful sign-in, forget that account's failures from this address only. axes
        would forget every failure matching the account *or* the address: someone holding one
        account could then wipe, between guesses, the address's count of guesses at another."""
        username = get_client_username(request, credentials)
        count, _ = AccessAttempt.objects.filter(username=username, ip_address=request.axes_ip_address).delete()
        return count
