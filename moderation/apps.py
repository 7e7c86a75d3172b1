import os
import sys

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ModerationConfig(AppConfig):
    name = "moderation"
    verbose_name = "Moderation"

    def ready(self) -> None:
        from moderation import checks  # noqa: F401  (registers the system checks)
        from moderation.api import schema  # noqa: F401  (registers the OpenAPI auth scheme)
        from moderation.defaults import ensure_defaults
        from moderation.db.statement_cache import widen

        widen()  # psycopg caches the one-statement writes' conversion too

        post_migrate.connect(ensure_defaults, sender=self, dispatch_uid="moderation.ensure_defaults")
        if starting_moderation_cluster(sys.argv):
            preload_for_workers()
        if sys.argv[1:2] == ["qcluster"]:
            freeze_for_fork()


def starting_moderation_cluster(argv: list[str]) -> bool:
    """`manage.py qcluster` for the moderation job queue (the notification cluster needs no model)."""
    from django.conf import settings

    return argv[1:2] == ["qcluster"] and os.environ.get("Q_CLUSTER_NAME", "") in ("", settings.Q_NAME)


def preload_for_workers() -> None:
    """Load the local model and the language detector in the cluster's first process, before
    django-q2 forks its workers: they inherit both (copy-on-write, shared while unchanged)
    instead of each loading its own copy on its first job, whose transient allocations were a
    worker's peak memory (docs/operations.md, "Processes and scaling")."""
    from django.conf import settings

    from moderation.text.language import detector
    from moderation.providers.local import LocalProvider

    if settings.MODERATION_PROVIDER == "local":
        # (The module's model, not a provider instance: nothing that holds connections is made
        # before the fork.)
        LocalProvider().warm_up()
    detector()


def freeze_for_fork() -> None:
    """Move every object made so far (Django, the apps, the model) out of the garbage
    collector's reach before django-q2 forks the cluster's processes: a collection in a child
    would otherwise write to each object's header and copy its page, unsharing what the fork
    shared (docs/operations.md, "Sizing")."""
    import gc

    gc.collect()
    gc.freeze()
