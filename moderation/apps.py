from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ModerationConfig(AppConfig):
    name = "moderation"
    verbose_name = "Moderation"

    def ready(self) -> None:
        from moderation import checks  # noqa: F401  (registers the system checks)
        from moderation.api import schema  # noqa: F401  (registers the OpenAPI auth scheme)
        from moderation.defaults import ensure_defaults

        post_migrate.connect(ensure_defaults, sender=self, dispatch_uid="moderation.ensure_defaults")
