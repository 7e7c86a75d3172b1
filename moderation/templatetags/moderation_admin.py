from django import template

from moderation.observability.anomalies import anomalies
from moderation.words import actor_words
from moderation.observability.dashboard import dashboard_figures

register = template.Library()


@register.simple_tag(takes_context=True)
def moderation_dashboard(context):
    """The index's figures, of the reviews the logged-in user may see."""
    return dashboard_figures(viewer=context["request"].user)


@register.simple_tag
def moderation_anomalies():
    """The signals out of their band in the last full hour (docs/quality.md, "Anomaly alarms")."""
    return anomalies()


@register.filter
def actor_in_words(row) -> str:
    """Who made a recorded change, as a moderator reads it ("moderator sam", "the model", "the
    system"), never a worker's or host's id (moderation.words.actor_words)."""
    return actor_words(row.actor, row.actor_id)


@register.filter
def duration_s(seconds) -> str:
    """A number of seconds as people read a wait: 42s, 7m 5s, 3h 12m, 2d 4h."""
    if seconds is None:
        return "—"
    seconds = int(seconds)
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if seconds >= size:
            return f"{seconds // size}{unit} {seconds % size // sub_size}{sub}"
    return f"{seconds}s"
