from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit"

    def ready(self) -> None:
        from django.conf import settings

        from audit import tracing
        from audit.context import install_record_factory

        install_record_factory()
        tracing.configure(settings)  # off unless OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_TRACING
