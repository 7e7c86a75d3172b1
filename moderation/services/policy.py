"""Publishing and reading moderation policy versions, and the language a content is read in."""

from __future__ import annotations

import logging
from collections import OrderedDict
from threading import Lock

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Max, Q, Subquery
from django.utils import timezone

from moderation.errors import DraftChanged, DraftNotPreviewed, DraftStale, PolicyChanged
from moderation.text.default_terms import default_term_lists
from moderation.text.language import Detection, configured_languages, detect
from moderation.models import Content, ModerationPolicy, default_model_languages
from moderation.validation import AUTHOR_FIELDS, DEADLINE_FIELDS, DEFINITION_FIELDS, DSA_FIELDS, EVIDENCE_FIELDS, MEDIA_FIELDS, NOTICE_FIELDS, PART_FIELDS, PRIORITY_WEIGHTS, QA_FIELDS, REASON_FIELDS, REPORT_FIELDS, REPORT_THRESHOLD_DEFAULT, ROUTING_FIELDS, definitions_kept, validate_policy
from moderation.text.rules import term_lists_digest
from moderation.services.routing import review_queue_slugs
from moderation.verdicts import rule_text

logger = logging.getLogger(__name__)

_PUBLISH_LOCK = 0x6D6F6470  # advisory lock id: serialises version numbering

# The fields that make up a version (what a new one copies from the last and may change).
POLICY_FIELDS = (
    "reject_threshold",
    "review_threshold",
    "category_thresholds",
    "flagged_label",
    "term_lists",
    "model_languages",
    "unjudged_label",
    "report_threshold",
    "categories",
    *PRIORITY_WEIGHTS,
    *AUTHOR_FIELDS,
    *NOTICE_FIELDS,
    *REPORT_FIELDS,
    *DSA_FIELDS,
    *MEDIA_FIELDS,
    *REASON_FIELDS,
    *PART_FIELDS,
    *ROUTING_FIELDS,
    *DEFINITION_FIELDS,
    *QA_FIELDS,
    *EVIDENCE_FIELDS, *DEADLINE_FIELDS,
)
# Fields the review queues use (categories, priority weights), the rules for authors and the
# notices to affected users: left out, each takes its default.
_WORKPLACE_FIELDS = ("categories", *PRIORITY_WEIGHTS, *AUTHOR_FIELDS, *NOTICE_FIELDS, *REPORT_FIELDS, *DSA_FIELDS, *MEDIA_FIELDS,
                     *REASON_FIELDS, *PART_FIELDS, *ROUTING_FIELDS, *DEFINITION_FIELDS, *QA_FIELDS, *EVIDENCE_FIELDS, *DEADLINE_FIELDS)

# The thresholds `make model` chose for the local model's categories on its calibration split, in
# English and Indonesian (training/train.py; what they give on held-out data: docs/model-card.md):
# rejection from the score at which at least 92% of what the model rejected should not have been
# approved; a human looks from where "not approved" F1 is best with at most a fifth of each
# language's texts sent to a person. Categories no local model scores (a provider's others) keep 0.5 and 0.9.
DEFAULT_POLICY = {
    "reject_threshold": 0.9,
    "review_threshold": 0.5,
    "category_thresholds": {
        "insult": {"review": 0.34, "reject": 0.5},
        "threat": {"review": 0.34, "reject": 0.5},
        "hate": {"review": 0.36, "reject": 0.92},
        "sexual": {"review": 0.3, "reject": 0.5},
        "profanity": {"review": 0.35, "reject": 0.5},
    },
    "flagged_label": "manual_review",
    "notes": "Initial policy: the local model's thresholds per category (docs/model-card.md).",
}
DEFAULT_TERMS_NOTE = " The default term lists (moderation/data/terms) for: {languages}, and emoji."


def policy_active() -> ModerationPolicy:
    """The newest version that is not a draft (post_migrate publishes the default one, so there
    always is one). A draft acts on nothing until it is activated (`policy_activate`)."""
    return ModerationPolicy.objects.filter(is_draft=False).order_by("-version").first() or policy_ensure_default()


def policy_active_id_subquery() -> Subquery:
    """The newest version's id, as a subquery: a statement the hot path sends anyway carries it
    (finalize's read of the operation), and `policy_published` turns it into the policy."""
    return Subquery(ModerationPolicy.objects.filter(is_draft=False).order_by("-version").values("pk")[:1])


_PUBLISHED: OrderedDict = OrderedDict()
_PUBLISHED_LOCK = Lock()


def policy_published(policy_id: int | None) -> ModerationPolicy:
    """The published version `policy_id` (None: the newest), read once per process: versions are
    never edited in place (ModerationPolicy), so a version once read stays true. Callers only
    read it (its compiled rules are cached the same way: moderation.text.rules.compiled)."""
    if policy_id is None:
        return policy_active()
    with _PUBLISHED_LOCK:
        policy = _PUBLISHED.get(policy_id)
        if policy is not None:
            _PUBLISHED.move_to_end(policy_id)
            return policy
    policy = ModerationPolicy.objects.get(pk=policy_id)
    with _PUBLISHED_LOCK:
        _PUBLISHED[policy_id] = policy
        while len(_PUBLISHED) > 4:
            _PUBLISHED.popitem(last=False)
    return policy


def policy_ensure_default() -> ModerationPolicy:
    """Publish version 1 with the default thresholds and the default term lists of the configured
    languages if no policy exists yet.

    Only a fresh installation gets the lists this way: an existing policy is never changed behind
    its operator's back (decisions would change with no version published by a person). An
    operator adopts them as a new version with `manage.py policy_terms defaults --publish`
    (docs/policy-rules.md, "Default term lists").
    """
    existing = ModerationPolicy.objects.filter(is_draft=False).order_by("-version").first()
    if existing is not None:
        return existing
    languages = configured_languages()
    term_lists = default_term_lists(languages)
    shipped = sorted({rule["language"] for rule in term_lists} - {""})
    notes = DEFAULT_POLICY["notes"] + DEFAULT_TERMS_NOTE.format(languages=", ".join(shipped) or "no language")
    return policy_publish(**{**DEFAULT_POLICY, "notes": notes}, term_lists=term_lists)


def policy_draft(base: ModerationPolicy, **changes) -> ModerationPolicy:
    """An unsaved next version: `base`'s fields with `changes`. Dry runs decide with it; publish
    it with `policy_publish(**policy_fields(draft))`."""
    unknown = set(changes) - set(POLICY_FIELDS) - {"notes"}
    if unknown:
        raise TypeError(f"not policy fields: {', '.join(sorted(unknown))}")
    return ModerationPolicy(version=base.version + 1, **{**policy_fields(base), **changes})


def policy_fields(policy: ModerationPolicy) -> dict:
    return {name: getattr(policy, name) for name in POLICY_FIELDS}


@transaction.atomic
def policy_publish(
    *,
    reject_threshold: float,
    review_threshold: float,
    category_thresholds: dict | None = None,
    flagged_label: str = "manual_review",
    term_lists: list | None = None,
    model_languages: list | None = None,
    unjudged_label: str = "manual_review",
    report_threshold: int = REPORT_THRESHOLD_DEFAULT,
    notes: str = "",
    created_by=None,
    based_on: int | None = None,
    draft: bool = False,
    **workplace,
) -> ModerationPolicy:
    """Publish a new policy version; past versions stay as they were (decisions point at them).

    `draft`: the version is made a draft of the active one, which acts on nothing until
    `policy_activate` (docs/quality.md, "Drafts"). Drafts take their number from the same
    sequence, so a version number names one version whatever it became.

    `workplace` holds the review-queue fields (`categories` and the priority weights,
    moderation.validation.PRIORITY_WEIGHTS), the rules for authors (AUTHOR_FIELDS), the
    notices to affected users (NOTICE_FIELDS) and the written category definitions
    (DEFINITION_FIELDS); each one left out takes the model's default (the definitions: the
    shipped ones of the categories the version has).

    `based_on`: the version the caller read and changed. If another was published since,
    PolicyChanged is raised and nothing is written: publishing would silently drop that
    version's changes (two term imports at once would each lose the other's terms).
    """
    unknown = set(workplace) - set(_WORKPLACE_FIELDS)
    if unknown:
        raise TypeError(f"policy_publish() got unexpected fields: {', '.join(sorted(unknown))}")
    fields = {
        **{name: workplace[name] if workplace.get(name) is not None
           else ModerationPolicy._meta.get_field(name).get_default() for name in _WORKPLACE_FIELDS},
        "reject_threshold": reject_threshold,
        "review_threshold": review_threshold,
        "category_thresholds": category_thresholds or {},
        "flagged_label": flagged_label,
        "term_lists": term_lists or [],
        "model_languages": default_model_languages() if model_languages is None else model_languages,
        "unjudged_label": unjudged_label,
        "report_threshold": report_threshold,
    }
    if workplace.get("category_definitions") is None:
        # Left out: the shipped definitions of the categories this version has (docs/providers.md).
        fields["category_definitions"] = definitions_kept(fields["category_definitions"], fields)
    errors = validate_policy(fields, queues=review_queue_slugs())
    if errors:
        raise ValidationError(errors)
    _lock_publishing()
    numbers = ModerationPolicy.objects.aggregate(any=Max("version"), active=Max("version", filter=Q(is_draft=False)))
    latest, active = numbers["any"] or 0, numbers["active"] or 0
    if based_on is not None and based_on != active:
        raise PolicyChanged(expected=based_on, actual=active)
    return ModerationPolicy.objects.create(version=latest + 1, notes=notes, created_by=created_by, is_draft=draft,
                                           drafted_from=active if draft else None, **fields)


@transaction.atomic
def policy_activate(*, version: int, user, expected_active: int | None = None) -> ModerationPolicy:
    """Make the draft `version` the active version: one step, under the publishing lock, audited
    (the version's history records who and when; the log says it too).

    Refused (DraftStale, nothing written) when it is not a draft, or when the active version is
    no longer the one it was drafted from: activating it would silently undo what was published
    since. `expected_active`: the active version the person saw beside the draft's backtest; a
    different one refuses too, so nobody activates on figures compared with a version gone.
    """
    _lock_publishing()
    draft = ModerationPolicy.objects.select_for_update().filter(version=version).first()
    if draft is None:
        raise DraftStale(f"there is no policy v{version}")
    if not draft.is_draft:
        raise DraftStale(f"{draft} is not a draft: it was activated {draft.activated_at:%Y-%m-%d %H:%M} UTC"
                         if draft.activated_at else f"{draft} is not a draft")
    active = policy_active()
    if draft.drafted_from != active.version:
        raise DraftStale(f"{draft} was drafted from v{draft.drafted_from}, but {active} was published since: "
                         "make the draft again from the active version")
    if expected_active is not None and expected_active != active.version:
        raise DraftStale(f"the active version is now v{active.version}, not v{expected_active}: "
                         "compare the figures again")
    draft.is_draft, draft.activated_at, draft.activated_by = False, timezone.now(), user
    draft._history_user = user
    draft.save(update_fields=["is_draft", "activated_at", "activated_by"])
    logger.info("policy v%s activated by %s (it was drafted from v%s)", draft.version, user, draft.drafted_from)
    return draft


def policy_publish_previewed(
    *, draft: ModerationPolicy, previewed_digest: str | None, previewed_version: int | None, created_by=None,
) -> ModerationPolicy:
    """Publish `draft` (a `policy_draft`) only if it is the draft a supervisor previewed: its term
    lists' digest (`term_lists_digest`) is `previewed_digest`, and the version it was previewed
    against, `previewed_version`, is still the newest (checked under the publishing lock by
    `policy_publish`'s `based_on`: PolicyChanged). A draft never previewed raises
    DraftNotPreviewed; one changed since its preview, DraftChanged. Nothing is written then.
    """
    if not previewed_digest or previewed_version is None:
        raise DraftNotPreviewed()
    actual = term_lists_digest(draft.term_lists)
    if actual != previewed_digest:
        raise DraftChanged(previewed=previewed_digest, actual=actual)
    return policy_publish(**policy_fields(draft), notes=draft.notes, created_by=created_by,
                          based_on=previewed_version)


@transaction.atomic
def policy_publish_change(change, *, notes: str = "", created_by=None) -> ModerationPolicy:
    """Publish `change(active)` (a dict of the fields to change) as the next version.

    Read, change and publish happen under the publishing lock, so concurrent changes (two term
    imports) queue up and each applies to the version the other published.
    """
    _lock_publishing()
    active = policy_active()
    return policy_publish(**{**policy_fields(active), **change(active)}, notes=notes, created_by=created_by,
                          based_on=active.version)


def _lock_publishing() -> None:
    # Two publishers at once would both read the same max(version); the advisory lock (held to
    # the end of the transaction, re-entrant within it) makes the second wait for the first to
    # commit, then read after it.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_PUBLISH_LOCK])


def content_language(content: Content, *, stored_later: list[Content] | None = None) -> Detection:
    """The content's language: detected once (dispatch calls this before the provider, with no
    transaction open), stored on the content, read back after.

    The store is conditional, so two workers detecting at once store one (identical) answer;
    finalize calls this again under the review's row lock and finds it stored (or, should the
    store have failed, detects the same answer again). `stored_later`: a batch's list, stored
    together by `contents_language_store`.
    """
    if content.language_candidates is not None:
        return Detection(content.language, tuple((code, value) for code, value in content.language_candidates))
    detection = detect(rule_text(content))
    content.language, content.language_candidates = detection.language, detection.as_json()
    if stored_later is None:
        contents_language_store([content])
    else:
        stored_later.append(content)
    return detection


def contents_language_store(contents: list[Content]) -> None:
    """Store the detected languages of `contents` in one UPDATE: each row only if it has none
    stored yet (`content_language`)."""
    if not contents:
        return
    meta = Content._meta
    language, candidates = meta.get_field("language"), meta.get_field("language_candidates")
    rows = ", ".join(["(%s::uuid, %s::text, %s::jsonb)"] * len(contents))
    params = []
    for content in contents:
        params += [content.pk, language.get_db_prep_save(content.language, connection),
                   candidates.get_db_prep_save(content.language_candidates, connection)]
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {quote(meta.db_table)} AS c SET {quote(language.column)} = v.language, "
            f"{quote(candidates.column)} = v.candidates FROM (VALUES {rows}) AS v (id, language, candidates) "
            f"WHERE c.{quote(meta.pk.column)} = v.id AND c.{quote(candidates.column)} IS NULL",
            params,
        )
