"""`manage.py qcluster`: django-q2's command, with a cluster that survives the death of any one
of its processes (moderation/management/cluster.py). `moderation` is listed before `django_q`
in INSTALLED_APPS, so this command is the one `qcluster` names."""

import os

from django.conf import settings
from django_q.management.commands.qcluster import Command as DjangoQCommand

from moderation.management.cluster import ResilientCluster


class Command(DjangoQCommand):
    help = "Starts a django-q2 cluster that rebuilds itself when any of its processes dies."

    def handle(self, *args, **options):
        # As django-q2's own handle(), with the resilient cluster.
        settings.SECRET_KEY  # noqa: B018 - the cluster signs its tasks: refuse to start without it
        if options.get("cluster_name"):
            os.environ["Q_CLUSTER_NAME"] = options["cluster_name"]
        cluster = ResilientCluster()
        cluster.start()
        if options.get("run_once", False):
            cluster.stop()
