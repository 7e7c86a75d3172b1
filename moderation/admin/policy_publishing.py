"""Publishing a policy version from an admin editor (the term lists, the notice templates, the
routing rules): one answer to a refusal, on the form that asked, and one message on success."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.core.exceptions import ValidationError

from moderation.errors import DraftNotPreviewed, PolicyChanged
from moderation.models import ModerationPolicy


def publish_from_form(model_admin, request, form, publish: Callable[[], ModerationPolicy], *,
                      again: str) -> ModerationPolicy | None:
    """`publish()` (a service that publishes a version): the version, with a success message;
    None, with why on `form` and what to do `again`, if it was refused."""
    try:
        published = publish()
    except (PolicyChanged, DraftNotPreviewed) as exc:  # PolicyChanged: published since this request's read
        form.add_error(None, f"Not published: {exc.reason}: {again}")
        return None
    except ValidationError as exc:
        form.add_error(None, exc)
        return None
    model_admin.message_user(request, f"Published policy version {published.version}.", messages.SUCCESS)
    return published
