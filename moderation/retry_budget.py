"""Every layer that retries, read from the one place they are configured (settings), and what
they add up to for one moderation. `manage.py retry_policy` prints it."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

# Providers that return the same answer for a repeated Idempotency-Key without doing the work
# again. An OpenAI-compatible /v1/moderations ignores the header; the local model runs in-process.
KEY_HONOURED = {"webhook": True, "openai": False, "llm": False, "local": False}


@dataclass(frozen=True)
class Layer:
    name: str
    tries: str
    timing: str
    reuses_key: str
    note: str
    warning: str = ""


def layers() -> list[Layer]:
    s, q = settings, settings.Q_CLUSTER
    provider = s.MODERATION_PROVIDER
    honoured = KEY_HONOURED.get(provider, False)
    remote = provider in ("webhook", "openai", "llm")
    result = []
    if remote:
        result.append(Layer(
            "HTTP client (httpx)", f"1 + {s.PROVIDER_HTTP_RETRIES} connection retries",
            f"connect {s.PROVIDER_CONNECT_TIMEOUT_S:g}s, read/write {s.PROVIDER_TIMEOUT_S:g}s", "yes (same request)",
            "retries only failed connections: the request never left",
        ))
    result.append(Layer(
        "provider attempts (our records)", f"{s.MODERATION_MAX_ATTEMPTS} per operation",
        f"backoff {s.MODERATION_RETRY_BACKOFF_S:g}s doubling to {s.MODERATION_RETRY_BACKOFF_MAX_S:g}s, jittered",
        "yes", "timeouts, connection errors, 5xx, 429 (after its Retry-After, within the cap), malformed answers; "
        "then manual_review",
        "" if honoured or provider == "local" else
        f"the {provider} provider ignores Idempotency-Key: each attempt is a separate execution there",
    ))
    result.append(Layer(
        "django-q2 task", f"max_attempts={q.get('max_attempts')}; a killed worker's task comes back",
        f"timeout {q.get('timeout')}s, lease (retry) {q.get('retry')}s", "yes (the key is in the database)",
        "an at-least-once trigger: a re-run finds the claim lost or the attempt in flight",
        "" if q.get("max_attempts") == 1 else "max_attempts != 1: failed tasks are re-run by the broker",
    ))
    result.append(Layer(
        "reconcile (supersede)", f"1 + {s.MODERATION_MAX_SUPERSEDES} operations",
        f"after {s.MODERATION_STUCK_AFTER_S:g}s of silence, sweep every {s.MODERATION_SWEEP_EVERY_MIN} min",
        "no: a new key by design", "a lost callback starts an explicit new operation; a late answer to the old one is stale",
    ))
    if provider == "webhook":
        result.append(Layer(
            "provider webhook re-delivery", "the provider's policy", f"signatures valid for {s.CALLBACK_TOLERANCE_S:g}s",
            "n/a (same webhook-id)", "de-duplicated by the inbox's unique (provider, webhook-id)",
        ))
    return result


def worst_case() -> dict[str, int]:
    """Upper bounds for one moderation (one submission, without operator reprocessing)."""
    s = settings
    operations = 1 + s.MODERATION_MAX_SUPERSEDES
    requests = operations * s.MODERATION_MAX_ATTEMPTS
    honoured = KEY_HONOURED.get(s.MODERATION_PROVIDER, False)
    return {
        "operations (idempotency keys)": operations,
        "provider requests sent": requests,
        "connection tries": requests * (1 + s.PROVIDER_HTTP_RETRIES) if s.MODERATION_PROVIDER != "local" else requests,
        "logical executions at the provider": operations if honoured else requests,
    }


# Database work around one provider call (claim, attempt records, finalize) must fit in the task
# timeout beside it (moderation.checks; a batch's calls, moderation.services.batch).
TASK_MARGIN_S = 5


def provider_worst_case_s() -> float:
    """Longest one provider attempt may take: every connection try, then writing and reading."""
    connects = settings.PROVIDER_CONNECT_TIMEOUT_S * (1 + settings.PROVIDER_HTTP_RETRIES)
    return connects + 2 * settings.PROVIDER_TIMEOUT_S
