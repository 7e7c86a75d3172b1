from django import template

from moderation.observability.dashboard import dashboard_figures

register = template.Library()


@register.simple_tag
def moderation_dashboard():
    return dashboard_figures()
