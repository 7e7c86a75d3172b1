from django.conf import settings
from django.core.management.base import BaseCommand

from moderation.retry_budget import layers, worst_case
from moderation.services import circuit_get


class Command(BaseCommand):
    help = "Print every layer that retries, its attempts and timeouts, and the worst case for one moderation."

    def handle(self, *args, **options):
        provider = settings.MODERATION_PROVIDER
        self.stdout.write(f"Retry budget for one moderation (MODERATION_PROVIDER={provider})\n")
        warnings = []
        for layer in layers():
            self.stdout.write(f"{layer.name}\n  tries:      {layer.tries}\n  timing:     {layer.timing}\n"
                              f"  reuses key: {layer.reuses_key}\n  why safe:   {layer.note}")
            if layer.warning:
                warnings.append(f"{layer.name}: {layer.warning}")
        self.stdout.write("\nWorst case:")
        for name, value in worst_case().items():
            self.stdout.write(f"  {value:>4}  {name}")
        circuit = circuit_get(provider)
        self.stdout.write(
            f"\nCircuit breaker ({provider}): {circuit.state}; opens at {settings.BREAKER_FAILURE_RATIO:.0%} failures "
            f"of >= {settings.BREAKER_MIN_CALLS} attempts in {settings.BREAKER_WINDOW_S:g}s, "
            f"trial call after {settings.BREAKER_COOLDOWN_S:g}s"
        )
        for warning in warnings:
            self.stdout.write(self.style.WARNING(f"WARNING {warning}"))
