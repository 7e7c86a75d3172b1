"""`manage.py qcluster`: django-q2's command, with a cluster that survives the death of any one
of its processes (moderation/management/cluster.py). `moderation` is listed before `django_q`
in INSTALLED_APPS, so this command is the one `qcluster` names."""

from django_q.management.commands.qcluster import Command as DjangoQCommand

from moderation.management.cluster import ResilientCluster


class Command(DjangoQCommand):
    help = "Starts a django-q2 cluster that rebuilds itself when any of its processes dies."

    def handle(self, *args, **options):
        import django_q.management.commands.qcluster as django_q_command

        # django-q2's handle() builds `Cluster()` by its module's name: the one place to swap it.
        django_q_command.Cluster = ResilientCluster
        super().handle(*args, **options)
