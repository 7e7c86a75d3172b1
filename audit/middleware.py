"""A request id for every web request: taken from X-Request-ID when it is sane, else made up;
bound for the request's log records, echoed in the response, and handed to the jobs it enqueues."""

from __future__ import annotations

import re
import uuid

from audit import context

_SANE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def request_id_for(given: str) -> str:
    """The request id of a request that sent `given` as its X-Request-ID ("" if none)."""
    return given if _SANE.match(given) else uuid.uuid4().hex


class RequestIdMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request_id = request_id_for(request.headers.get("X-Request-ID", ""))
        request.request_id = request_id  # for log lines Django writes after this returns
        with context.bind(request_id=request_id):
            response = self.get_response(request)
        response["X-Request-ID"] = request_id
        return response
