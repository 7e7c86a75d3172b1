"""The Content-Security-Policy of every admin page (docs/operations.md, "Content-Security-Policy").

The admin loads nothing from elsewhere: no script, style, image, media, frame or object from any
origin but this one (the admin's CSS and JS come from WhiteNoise at /static/; images and audio
of content from our own copy, moderation/admin/review_media.py), and no site may frame it.
Content that slipped past escaping could still fetch nothing and run nothing.

A page with an inline script (the review page: its keyboard shortcuts) renders it with this
response's nonce (moderation/admin/review_page.workplace_page); every other page gets the policy
without one, from the middleware below, so its scripts run only from files. Django's own admin
templates have no inline script (their constants ride in `data-` attributes of `<script src>`).

Styles allow 'unsafe-inline': the admin's templates, ours and the libraries' (simple_history's
paginator), carry `style=""` attributes and `<style>` blocks, which a nonce cannot cover. A
style cannot run code or, with img-src and font-src held to 'self', send anything away.
"""

from __future__ import annotations

from django.urls import reverse

HEADER = "Content-Security-Policy"


def policy(nonce: str | None = None) -> str:
    """The admin's policy; with `nonce`, inline scripts carrying it run too."""
    scripts = f"'self' 'nonce-{nonce}'" if nonce else "'self'"
    return ("default-src 'self'; img-src 'self' data:; media-src 'self'; frame-src 'none'; object-src 'none'; "
            f"connect-src 'self'; style-src 'self' 'unsafe-inline'; script-src {scripts}; base-uri 'none'; "
            "form-action 'self'; frame-ancestors 'none'")


class AdminCspMiddleware:
    """Every response under the admin's prefix carries the admin's policy, unless its view set a
    stricter one of its own (a nonce for its script; the media viewer's sandbox)."""

    def __init__(self, get_response):
        self.get_response = get_response
        self._prefix: str | None = None

    def __call__(self, request):
        response = self.get_response(request)
        if self._prefix is None:  # the URLconf is loaded by the first request, not at start-up
            self._prefix = reverse("admin:index")
        if request.path_info.startswith(self._prefix) and HEADER not in response:
            response[HEADER] = policy()
        return response
