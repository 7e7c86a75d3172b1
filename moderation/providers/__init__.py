"""Provider adapters behind one interface, chosen by name (`MODERATION_PROVIDER`)."""

from __future__ import annotations

from collections.abc import Callable

from moderation.providers.base import (
    Accepted,
    ItemError,
    MalformedAnswer,
    NO_MODEL,
    TEXT_KINDS,
    ModerationInput,
    ModerationResult,
    OperationStatus,
    PartScore,
    Provider,
    ProviderError,
    Rationale,
    UnsupportedContent,
    provider_answers_inline,
    provider_judges,
    provider_reads_policy,
)

__all__ = [
    "Accepted",
    "ItemError",
    "MalformedAnswer",
    "NO_MODEL",
    "TEXT_KINDS",
    "ModerationInput",
    "ModerationResult",
    "OperationStatus",
    "PartScore",
    "Provider",
    "ProviderError",
    "Rationale",
    "UnsupportedContent",
    "get_provider",
    "provider_answers_inline",
    "provider_judges",
    "provider_reads_policy",
    "register",
]


def _local() -> Provider:
    from moderation.providers.local import LocalProvider

    return LocalProvider()


def _webhook() -> Provider:
    from moderation.providers.webhook import WebhookProvider

    return WebhookProvider()


def _openai() -> Provider:
    from moderation.providers.openai import OpenAIProvider

    return OpenAIProvider()


def _llm() -> Provider:
    from moderation.providers.llm import LlmProvider

    return LlmProvider()


_factories: dict[str, Callable[[], Provider]] = {"local": _local, "webhook": _webhook, "openai": _openai, "llm": _llm}
_instances: dict[str, Provider] = {}


def register(name: str, factory: Callable[[], Provider]) -> None:
    """Make a provider available by name (adapters, and scripted providers in tests)."""
    _factories[name] = factory
    _instances.pop(name, None)


def provider_names() -> list[str]:
    """The names `get_provider` knows, sorted."""
    return sorted(_factories)


def unregister(name: str) -> None:
    _factories.pop(name, None)
    _instances.pop(name, None)


def get_provider(name: str) -> Provider:
    if name not in _instances:
        try:
            factory = _factories[name]
        except KeyError:
            raise LookupError(f"no provider named {name!r} (known: {', '.join(sorted(_factories))})") from None
        _instances[name] = factory()
    return _instances[name]
