"""The provider interface: one call in, a result, an acceptance (callback later) or a typed error."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class ModerationInput:
    """What a provider receives for one attempt. The idempotency key is the same on every retry."""

    idempotency_key: str
    content_type: str
    text: str = ""
    media_url: str = ""
    # An image's bytes (base64) and type, read by the moderation job (moderation/services/media.py):
    # what an image-capable provider judges, never the client's URL (providers fetch nothing).
    image_base64: str = ""
    media_mime: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    callback_url: str = ""
    # Our ids for the provider to echo back (review_id): never needed to match a result.
    reference: dict[str, str] = field(default_factory=dict)
    # The policy's written definitions of its categories ({category: text}) and its version, for
    # a provider that judges by them (`reads_policy`: the `llm` provider's prompt): filled only
    # for such a provider, from the version in force (dispatch) or the one measured
    # (evaluate_policy), so two wordings can be compared on the same texts.
    category_definitions: dict[str, str] = field(default_factory=dict)
    policy_version: int | None = None


def image_of(request: ModerationInput) -> tuple[str, str]:
    """An image input's (base64 bytes, mime type), as the job read them. A provider is sent these,
    never the client's `media_url`: it would fetch that itself, from wherever the client pointed
    it and outside our outbound guard, and the URL may serve other bytes than those the job hashed
    and matched."""
    if not request.image_base64 or not request.media_mime:
        raise UnsupportedContent("an image is sent as its bytes, and none were read")
    return request.image_base64, request.media_mime


@dataclass(frozen=True)
class PartScore:
    """A provider's scores of one part of a text (moderation.text.parts): text[start:end], where
    the text is the one the rules read (moderation.verdicts.rule_text)."""

    start: int
    end: int
    scores: dict[str, float]


@dataclass(frozen=True)
class Rationale:
    """Why a provider that explains itself (the `llm` provider) judged as it did: the category
    it named, its score, its rationale in its own words, and the span of the text it quoted
    (text[start:end] of the text the rules read, moderation.verdicts.rule_text; None when it
    named no violation), under the definitions of `policy_version`."""

    category: str
    score: float
    text: str
    start: int | None = None
    end: int | None = None
    policy_version: int | None = None

    def record(self) -> dict:
        """What `Decision.rationale` keeps."""
        return {"category": self.category, "score": self.score, "text": self.text, "start": self.start,
                "end": self.end, "policy_version": self.policy_version}


@dataclass(frozen=True)
class ModerationResult:
    """A result in the OpenAI moderation shape (`results[0]` of the callback body, docs/design.md).

    `category_scores` judge the text as a whole. A provider that also judged its parts (the local
    model, for a text of more than one sentence) gives their scores in `parts`; the policy's
    `part_rule` says how they count (moderation.verdicts.judged_scores). Remote providers give none.
    """

    model: str
    flagged: bool
    categories: dict[str, bool]
    category_scores: dict[str, float]
    provider_request_id: str = ""
    parts: tuple[PartScore, ...] = ()
    rationale: Rationale | None = None

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> ModerationResult:
        """Parse `{"id", "model", "results": [{...}]}`; raises MalformedAnswer on a bad shape."""
        try:
            item = data["results"][0]
            scores = {str(k): float(v) for k, v in item["category_scores"].items()}
            categories = {str(k): bool(v) for k, v in item.get("categories", {}).items()}
            flagged = item["flagged"]
            if not isinstance(flagged, bool) or not isinstance(data.get("model", ""), str):
                raise TypeError("flagged must be a boolean and model a string")
            if any(not 0.0 <= s <= 1.0 for s in scores.values()):
                raise ValueError("category scores must lie in [0, 1]")
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise MalformedAnswer(f"malformed moderation result: {exc}") from exc
        return cls(
            model=data.get("model", ""),
            flagged=flagged,
            categories=categories,
            category_scores=scores,
            provider_request_id=str(data.get("id", "")),
        )


# What finalize is given for an image no provider here can judge: no model spoke (its banks and
# the policy's image_fallback decide, moderation.verdicts.media_decide). Compared by identity.
NO_MODEL = ModerationResult(model="", flagged=False, categories={}, category_scores={})

# What a provider judges unless it says otherwise (`Provider.kinds`).
TEXT_KINDS = frozenset({"text", "metadata"})


def provider_judges(provider, kind: str) -> bool:
    """Whether `provider` declares it can judge content of `kind` (docs/design.md, "Providers")."""
    return kind in getattr(provider, "kinds", TEXT_KINDS)


def provider_reads_policy(provider) -> bool:
    """Whether `provider` judges by the policy's written category definitions (`reads_policy`):
    its input then carries them (ModerationInput.category_definitions)."""
    return bool(getattr(provider, "reads_policy", False))


def provider_answers_inline(provider) -> bool:
    """Whether `provider` answers in the call, with no callback to wait for: any but one that
    declares `calls_back` (the webhook protocol's, which may answer 202 and call back later). What
    asks about texts outside a review (`manage.py evaluate_policy`) can only use those."""
    return not getattr(provider, "calls_back", False)


@dataclass(frozen=True)
class Accepted:
    """The provider queued the work and will call back (HTTP 202)."""

    provider_request_id: str


@dataclass(frozen=True)
class OperationStatus:
    """What the provider says of an operation it accepted (docs/design.md, "Provider status and reconcile"):
    `state` "queued" (still working), "completed" (with `result`) or "failed" (with `error`)."""

    state: str
    result: ModerationResult | None = None
    error: str = ""


class ProviderError(Exception):
    """A failed attempt. `retryable` says whether another attempt with the same key may succeed."""

    kind = "error"
    retryable = True

    def __init__(self, message: str, *, http_status: int | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.http_status = http_status
        # What the provider asked us to wait before trying again (a 429's or 503's Retry-After):
        # the next attempt waits at least that long, within the backoff's cap (dispatch.retry_delay).
        self.retry_after_s = retry_after_s

    @classmethod
    def unexpected(cls, exc: Exception) -> ProviderError:
        """The attempt's error for an exception nobody expected (a bug), chained to it."""
        error = cls(f"unexpected {type(exc).__name__}: {exc}")
        error.__cause__ = exc
        return error


class ProviderTimeout(ProviderError):
    kind = "timeout"


class ProviderConnectionError(ProviderError):
    kind = "connection_error"


class ProviderServerError(ProviderError):
    kind = "http_5xx"


class ProviderClientError(ProviderError):
    kind = "http_4xx"
    retryable = False


class MalformedAnswer(ProviderError):
    kind = "malformed"


class ItemError(ProviderError):
    """This one input failed (an exception scoring, deciding or recording it), not the provider:
    its attempt alone fails, and is retried as any other; the others of its batch go on, and the
    provider's circuit does not count it (docs/design.md, "Batches")."""

    kind = "item_error"


class UnsupportedContent(ProviderError):
    """The provider cannot judge this content at all: a human has to."""

    kind = "unsupported"
    retryable = False


class Provider(Protocol):
    name: str
    # The content kinds it can judge ("text", "metadata", "image", "audio"); an image sent to a
    # provider without "image" is never sent: its banks and the policy's image_fallback decide.
    kinds: frozenset[str]

    def moderate(self, request: ModerationInput) -> ModerationResult | Accepted:
        """Call the provider once. Raises ProviderError. Must not touch the database."""
        ...

    # Optional: `reads_policy = True`, for a provider that judges by the policy's written category
    # definitions (ModerationInput.category_definitions, filled for it alone).
    # Optional: `status(*, provider_request_id, idempotency_key) -> OperationStatus | None`, the
    # provider's answer about an accepted operation; None when it does not know the operation
    # or does not answer. A provider without it is superseded when it goes silent.
