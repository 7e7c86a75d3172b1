from django.apps import AppConfig


class LabAppConfig(AppConfig):
    """Tools beside the product: the race lab and the provider simulator, with their commands.

    The product never imports this package (an import-linter contract); it needs the development
    requirements (psutil) only when a lab command runs.
    """

    name = "lab"
    verbose_name = "Lab (race lab, provider simulator)"
