"""Restricted queues closed everywhere (docs/workplace.md, "Routing rules and queue access").

A group-only queue holds reviews of every kind of history: one waiting (reported, noted, its
result brought by a callback), one that left it (rejected with a strike and an account action,
appealed, upheld), an image waiting (its bytes stored, a hash bank's draft matching it) and one
erased, with a bulk job over one of them. Then every URL of the admin site is walked, as a
moderator and a supervisor outside the queue's group: GET with the id of every row of every
model (and one that names no row), each list searched for the reviews' ids and words, and POST
to every URL of a row of theirs, with a form that would add a note, decide or act. No response
may hold the reviews' ids, words, operation keys or image (nor the queue's name or figures
outside the pages that configure it), and the reviews stay as they were. A URL that refuses a
row of theirs answers as it does for a row that does not exist. The same walk as a member of
the group does see all of it: the walk is not vacuous.

The URLs are read from the admin site's URL patterns and the rows from the database: a model, a
ModelAdmin or a view added later is walked too, and fails here if it forgets the check (a URL
parameter the walk cannot fill fails it as well, until `parameter_values` learns it).
"""

from __future__ import annotations

import html
import json
import operator
import re
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from functools import reduce
from itertools import product
from urllib.parse import quote, quote_plus, urlencode

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.db.models import F, Q
from django.test import Client
from django.urls import URLResolver, get_resolver, reverse
from django.urls.resolvers import RoutePattern
from django.views.generic import RedirectView

from callbacks.payload import parse
from callbacks.services import callback_process, callback_store
from moderation import services, tasks
from moderation.privacy.erasure import content_erase
from moderation.quality import backtests, shadows
from moderation.observability.dashboard import dashboard_figures
from moderation.models import (
    AccountAppeal,
    ApiClient,
    Backtest,
    BulkAction,
    BulkJob,
    ContentReview,
    GoldenItem,
    HashBank,
    HashBankEntry,
    ModerationPolicy,
    ModerationQueue,
    ModeratorNote,
    QaItem,
    ReviewMedia,
    ReviewStatus,
    ShadowRun,
    Strike,
    TransparencyStatement,
)
from tests.helpers import result, silent_for
from tests.helpers_media import encoded, image_hash, image_header, picture

pytestmark = pytest.mark.django_db

VAULT, VAULT_NAME, VAULT_GROUP = "vaultq7x", "Vault of q7x reviews", "vault-q7x-members"
MARK = "qz7vaultmark"  # in every text of a forbidden review, first, so an excerpt shows it
SEARCHED = "zebrafoxtrotq7"  # a word of the waiting review only: the walk searches for it
# The auditor's pages are the moderator's, without the images and the actions (moderation/roles.py).
ROLES = ("moderator", "supervisor")
# URL parameters the walk fills beyond the rows' ids: every value any view takes.
WORDS = {
    "action": ["override", "escalate", "reprocess", "undo", "warn", "suspend", "ban", "lift", *BulkAction.values],
    "button": ["mute", "unmute", "auto", "disable", "enable"],
}
SKIPPED = {"logout", "password_change", "password_change_done", "login"}  # the session's own pages
# The pages that configure the queues and the rules naming them: there the vault is named, but no
# figure of its reviews shows (its row's "waiting" on the queues' list, the routing dry run's).
CONFIGURATION = re.compile(r"/admin/moderation/(moderationqueue|moderationpolicy)/")
VAULT_FIGURES = [re.compile(rf'>{VAULT}</a></th>[^\n]*?<td class="field-waiting">[0-9]'),
                 re.compile(rf'id="routing-queue-{VAULT}"[^>]*><td>[^<]*</td>\s*<td class="now">[1-9]'),
                 re.compile(rf"[0-9]+ from {re.escape(VAULT_NAME)} to ")]


@dataclass
class World:
    forbidden: list[ContentReview]  # the waiting one, the one that left, the image, the erased one
    needles: dict[str, str] = field(default_factory=dict)  # what must not show -> what it is
    image: bytes = b""
    thumbnail: bytes = b""
    searches: list[str] = field(default_factory=list)


def staff(django_user_model, name: str, *groups: str):
    user = django_user_model.objects.create_user(name, password="pw-long-enough-1", is_staff=True)
    user.groups.add(*Group.objects.filter(name__in=groups))
    return user


def to_manual_review(review: ContentReview) -> ContentReview:
    request = services.review_claim(review_id=review.pk, worker_id="w")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.6), cause="provider_result")
    return ContentReview.objects.select_related("content").get(pk=review.pk)


def by_callback(review: ContentReview) -> ContentReview:
    """The provider's result for `review`, as a callback brings it (stored in the inbox, applied)."""
    request = services.review_claim(review_id=review.pk, worker_id="w")
    body = json.dumps({"type": "moderation.completed", "data": {
        "id": f"prov-{review.short_id}", "idempotency_key": str(request.idempotency_key), "model": "sim-1",
        "results": [{"flagged": True, "categories": {"harassment": True}, "category_scores": {"harassment": 0.6}}]}})
    stored = callback_store(provider="webhook", event_id=f"evt-{MARK}-{review.short_id}", body=body, headers={},
                            event=parse(body))
    callback_process(callback_id=stored.id)
    return ContentReview.objects.select_related("content").get(pk=review.pk)


@pytest.fixture
def world(settings, api_client, django_user_model) -> World:
    """The vault queue (its group's only), what a routing rule sends there (the vault client's
    reviews) and reviews everyone may see, each with the rows that tell of it."""
    ModerationQueue.objects.create(slug=VAULT, name=VAULT_NAME).groups.add(Group.objects.create(name=VAULT_GROUP))
    vault, _ = services.api_client_create(name="vault-client")
    services.policy_publish_change(lambda active: {
        "routing_rules": [{"name": "the vault", "queue": VAULT, "when": {"client": ["vault-client"]}}],
        "strike_points": {"harassment": 5},  # one rejection suspends its author
        "qa_double_review_rate": 1.0})  # every moderator's decision is reviewed again (docs/qa.md)
    member = staff(django_user_model, "member-one", "supervisor", VAULT_GROUP)
    other_member = staff(django_user_model, "member-two", "moderator", VAULT_GROUP)
    # Drafts in shadow and backtested over what moderators decided (docs/quality.md): their pages
    # count a review of a queue the viewer may not open, never show it.
    active = services.policy_active()
    every = ("insult", "threat", "hate", "sexual", "profanity", "harassment")
    approve_all = services.policy_publish(**{**services.policy_fields(active), "review_threshold": 1.0, "reject_threshold": 1.0,
                                             "category_thresholds": {c: {"review": 1.0, "reject": 1.0} for c in every},
                                             "term_lists": []}, draft=True)
    to_humans = services.policy_publish(**{**services.policy_fields(active), "review_threshold": 0.0, "reject_threshold": 1.0,
                                           "category_thresholds": {c: {"review": 0.0, "reject": 1.0} for c in every}},
                                        draft=True)
    shadow = shadows.shadow_start(policy=approve_all, provider_name="local", user=member)

    # An image, judged by no provider: it waits for a human, in the vault.
    settings.MODERATION_PROVIDER = "local"
    data = encoded(picture(71))
    image, _ = services.review_submit(client=vault, external_id=f"{MARK}-image", kind="image",
                                      text=f"{MARK} caption of the image", author_id="vault-author",
                                      image=(data, image_header(data)))
    tasks.moderate_review(image.pk)
    settings.MODERATION_PROVIDER = "webhook"
    bank = HashBank.objects.create(name="walk-bank")  # a draft entry matching it: the dry run names it
    HashBankEntry.objects.create(bank=bank, pdq=image_hash(data)[0], label="walk entry")

    def submit(client, external_id: str, text: str):
        return services.review_submit(client=client, external_id=external_id, kind="text", text=text,
                                      author_id="vault-author" if client == vault else "acme-author")[0]

    approved = submit(vault, "vault-approved", "an approved text of the vault client")  # never queued: everyone's
    request = services.review_claim(review_id=approved.pk, worker_id="w")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.1), cause="provider_result")
    waiting = by_callback(submit(vault, f"{MARK}-waiting", f"{MARK} {SEARCHED} you are a complete fool"))
    for i in range(2):
        services.report_file(review_id=waiting.pk, reporter_id=f"reporter-{i}", reason="harassment",
                             detail=f"{MARK} report detail {i}")
    services.review_note_add(review_id=waiting.pk, author=member, text=f"{MARK} a member's note")

    left = to_manual_review(submit(vault, f"{MARK}-left", f"{MARK} a text decided and appealed"))
    services.report_file(review_id=left.pk, reporter_id="reporter-0", reason="spam", detail=f"{MARK} spam report")
    services.review_override(review_id=left.pk, label="rejected", category="harassment", moderator=member,
                             reason=f"{MARK} the member's reason", note=f"{MARK} note with the decision")
    services.appeal_file(review_id=left.pk, appellant_id="appellant-1", statement=f"{MARK} the appeal's statement")
    services.review_override(review_id=left.pk, label="rejected", category="harassment", moderator=other_member,
                             reason=f"{MARK} the appeal upheld")
    # Moderator QA of it: golden, and a second review that disagreed, waiting to be settled.
    services.golden_mark(review_id=left.pk, expected_label="rejected", expected_category="harassment", lead=member)
    second = staff(django_user_model, "member-three", "moderator", VAULT_GROUP)
    assert services.review_take_next(moderator=second, queue=VAULT).pk == left.pk
    services.qa_answer(item_id=QaItem.objects.get(review=left, moderator=second).pk, moderator=second,
                       label="approved", reason=f"{MARK} the second look")
    assert Strike.objects.filter(review=left).exists()
    assert TransparencyStatement.objects.filter(account_action__author__author_id="vault-author").exists()

    erased = to_manual_review(submit(vault, f"{MARK}-erased", f"{MARK} a text erased later"))
    content_erase(review_id=erased.pk, actor="admin", actor_id="member-one", reason="the author asked")

    shown = to_manual_review(submit(api_client, "acme-visible", "a visible text about kittens"))
    services.report_file(review_id=shown.pk, reporter_id="reporter-0", reason="spam", detail="a visible report")
    services.bulk_job_draft(reviews=ContentReview.objects.filter(pk__in=[waiting.pk, shown.pk]), moderator=member,
                            action=BulkAction.ESCALATE, reason="walk")
    services.bulk_job_draft(reviews=ContentReview.objects.filter(pk=shown.pk), moderator=member,
                            action=BulkAction.ESCALATE, reason="visible only")

    settings.QUALITY_SETTLE_S = 0
    assert shadows.shadows_run(deadline=time.monotonic() + 30) >= 3
    assert shadow.verdicts.exclude(label=F("live_label")).filter(review=left).exists()
    backtest = backtests.backtest_start(candidate=to_humans, provider_name="local", user=member, enqueue=False)
    backtests.backtest_run(backtest_id=backtest.pk, deadline=time.monotonic() + 60, enqueue_rest=False)
    backtest.refresh_from_db()
    assert str(left.pk) in {change["review"] for change in backtest.changes}

    rows = ContentReview.objects.select_related("content").in_bulk([waiting.pk, left.pk, image.pk, erased.pk])
    forbidden = [rows[waiting.pk], rows[left.pk], rows[image.pk], rows[erased.pk]]
    assert {r.status for r in forbidden} == {ReviewStatus.MANUAL_REVIEW, ReviewStatus.REJECTED}
    assert {r.last_queue for r in forbidden} == {VAULT} and ContentReview.objects.get(pk=left.pk).queue == ""
    assert ContentReview.objects.filter(pk=approved.pk, status=ReviewStatus.APPROVED, last_queue="").exists()
    world = World(forbidden=forbidden)
    for review in forbidden:
        world.needles |= {str(review.pk): f"the id of {review.content.external_id}",
                          review.short_id: "a short id",
                          str(review.content_id): "a content id", review.content.external_id: "an external id"}
        keys = review.requests.values_list("idempotency_key", flat=True)
        world.needles |= {str(key): "an operation key" for key in keys}
    world.needles |= {MARK: "a forbidden text"}
    world.image = bytes(ReviewMedia.objects.get(content_id=image.content_id).data)
    world.thumbnail = bytes(ReviewMedia.objects.get(content_id=image.content_id).thumbnail)  # the job made it
    world.searches = [SEARCHED, str(waiting.pk), waiting.short_id, waiting.content.external_id,
                      str(waiting.requests.values_list("idempotency_key", flat=True).first()), left.short_id]
    return world


# --- the walk -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Visit:
    method: str
    url: str
    typed: tuple[str, ...] = ()  # what the walker typed into it (a search, a queue): echoed back
    twin: str | None = None  # the same URL naming no row, when it names a row of a forbidden review


def admin_patterns():
    """(model or None, URL pattern) for every URL of the admin site: the site's own and each
    ModelAdmin's, custom views included, read from the URL resolver."""
    site = next(p for p in get_resolver().url_patterns if isinstance(p, URLResolver) and p.namespace == "admin")

    def walk(resolver, model):
        for pattern in resolver.url_patterns:
            if isinstance(pattern, URLResolver):
                app_label, model_name = str(pattern.pattern).strip("/").split("/")
                yield from walk(pattern, apps.get_model(app_label, model_name))
            else:
                yield model, pattern

    yield from walk(site, None)


def missing_id(model) -> str:
    return str(uuid.uuid4()) if model is None or model._meta.pk.get_internal_type() == "UUIDField" else "2147483000"


# The URL parameters naming a row, and the model of the row (None: the ModelAdmin's own model).
ROW_PARAMETERS = {"object_id": None, "id": None, "job_id": BulkJob, "appeal_id": AccountAppeal, "item_id": QaItem,
                  "golden_id": GoldenItem, "backtest_id": Backtest, "shadow_id": ShadowRun,
                  "policy_id": ModerationPolicy,
                  # Legal holds' own pages (docs/legal-holds.md): each of its ModelAdmin's rows.
                  "hold_id": None, "snapshot_id": None, "report_id": None, "request_id": None,
                  "review_id": ContentReview}


def parameter_values(name: str, model, world: World) -> list[str]:
    """Every value the walk gives URL parameter `name` of a URL of `model`'s ModelAdmin: each
    row's id and one naming no row, or each word a view takes."""
    if name == "object_id" and model is None:  # the site's "view on site" shortcut: a review
        return [str(r.pk) for r in world.forbidden]
    if name in ROW_PARAMETERS:
        model = ROW_PARAMETERS[name] or model
        return [str(pk) for pk in model._default_manager.values_list("pk", flat=True)] + [missing_id(model)]
    if name == "content_type_id":
        return [str(ContentType.objects.get_for_model(ContentReview).pk)]
    if name == "app_label":
        return sorted({m._meta.app_label for m in apps.get_models() if admin.site.is_registered(m)})
    if name in WORDS:
        return WORDS[name]
    raise AssertionError(f"the walk does not know how to fill the URL parameter {name!r}: teach parameter_values")


def rows_of_forbidden(model, world: World) -> set[str]:
    """The ids of `model`'s rows of a forbidden review: through a foreign key to the review, or
    to a row that has one (a provider attempt's operation, a statement's decision)."""
    ids = [r.pk for r in world.forbidden]
    if model is ContentReview:
        return {str(pk) for pk in ids}
    if model is None:
        return set()
    paths = []
    for f in model._meta.fields:
        if f.is_relation and f.related_model is ContentReview:
            paths.append(f.name)
        elif f.is_relation and f.related_model is not None:
            paths += [f"{f.name}__{g.name}" for g in f.related_model._meta.fields
                      if g.is_relation and g.related_model is ContentReview]
    if not paths:
        return set()
    condition = reduce(operator.or_, [Q(**{f"{path}__in": ids}) for path in paths])
    return {str(pk) for pk in model._default_manager.filter(condition).values_list("pk", flat=True)}


def visits(world: World) -> list[Visit]:
    """Every admin URL: GET each (with every row's id), each list and page without an id searched
    for the forbidden reviews' ids and words and narrowed to the vault, and POST to each URL of a
    row of a forbidden review. (Not to the other rows: changing a queue's groups, say, is a
    supervisor's to do.)"""
    found = []
    for model, pattern in admin_patterns():
        forbidden_rows = rows_of_forbidden(model, world)
        if pattern.name is None:  # Django's own unnamed routes: a redirect to the change page, the catch-all
            known = getattr(pattern.callback, "view_class", None) is RedirectView or \
                pattern.callback.__name__ == "catch_all_view"
            assert known, f"an unnamed admin URL the walk cannot reverse: {pattern}"
            continue
        if pattern.name in SKIPPED:
            continue
        if isinstance(pattern.pattern, RoutePattern):
            names = list(pattern.pattern.converters)
        else:
            names = list(pattern.pattern.regex.groupindex) or ["object_id", "version_id"][:pattern.pattern.regex.groups]
        if names == ["object_id", "version_id"]:  # simple_history's page of one version
            rows = [(str(pk), str(h)) for pk, h in model.history.values_list(model._meta.pk.attname, "history_id")]
            urls = [(reverse(f"admin:{pattern.name}", args=row),
                     reverse(f"admin:{pattern.name}", args=(missing_id(model), row[1]))
                     if row[0] in forbidden_rows else None) for row in rows]
        else:
            urls = []
            for values in product(*[parameter_values(name, model, world) for name in names]):
                kwargs = dict(zip(names, values, strict=True))
                missing = {name: missing_id(model) for name in names
                           if name == "object_id" and kwargs[name] in forbidden_rows}
                urls.append((reverse(f"admin:{pattern.name}", kwargs=kwargs),
                             reverse(f"admin:{pattern.name}", kwargs=kwargs | missing) if missing else None))
        of_row = any(name in ROW_PARAMETERS for name in names)
        for url, twin in urls:
            found.append(Visit("GET", url, twin=twin))
            if twin:  # a row of a forbidden review: a write to it must be refused (to others it is the role's)
                found.append(Visit("POST", url, twin=twin))
            if of_row:
                if model is ContentReview:  # its media page's thumbnail
                    found.append(Visit("GET", url + "?size=thumb", twin=twin and twin + "?size=thumb"))
            elif not pattern.name.endswith("_add") and pattern.name not in ("autocomplete", "jsi18n"):
                found += [Visit("GET", f"{url}?{urlencode({'q': term})}", typed=(term,)) for term in world.searches]
                found += [Visit("GET", f"{url}?{query}", typed=(VAULT, SEARCHED))
                          for query in (f"queue__exact={VAULT}", f"queue={VAULT}&q={SEARCHED}")]
                found.append(Visit("GET", f"{url}?_facets=1"))  # a list's counts by filter
    return found


SHORTEST_NEEDLE = 8  # a short id's length; every other needle is longer


def posted(world: World) -> dict:
    """A form as full as any one-row POST takes: it would add a note, decide, escalate, act on an
    author, mute a reporter, re-queue a statement... if the view let it through."""
    return {"text": f"{MARK} a note the walk posted", "reason": "the walk", "note": "", "label": "approved",
            "category": "harassment", "version": str(world.forbidden[0].version), "queue": VAULT, "days": "1",
            "outcome": "upheld", "token": "x", "post": "yes", "reveal": "on", "decision": "1", "release": "on"}


def previews(world: World, active_version: int) -> list[tuple[str, dict]]:
    """The policy editors' previews, which only a POST with their own form draws, over the
    forbidden reviews: the term editor's and the routing editor's dry runs, a notice's preview
    for a forbidden review (by id, short id, and the newest rejected one), and Review next."""
    left = world.forbidden[1]
    base = {"base_version": active_version, "preview": "1", "notes": ""}
    return [
        ("/admin/moderation/moderationpolicy/terms/", {**base, "category": "harassment", "action": "reject",
                                                       "language": "", "mode": "add", "terms": "walkterm",
                                                       "dry_texts": "", "dry_last": 500}),
        ("/admin/moderation/moderationpolicy/routing/", {**base, "rules": "[]", "dry_last": 500}),
        *[("/admin/moderation/moderationpolicy/notices/", {**base, "review": term})
          for term in (str(left.pk), left.short_id, "")],
        ("/admin/moderation/contentreview/review-next/", {"queue": VAULT}),
        ("/admin/moderation/contentreview/review-next/", {}),
    ]


def shown(response, visit: Visit, world: World) -> list[str]:
    """What of the forbidden reviews `response` holds, beyond what the walker typed into it."""
    body = response.content
    found = [what for needle, what in (
        (world.image, "the image's bytes"), (world.thumbnail, "the image's thumbnail")) if needle in body]
    text = body.decode("utf-8", "replace")
    # Only what could hold a needle is taken out: taking out a form's "1" everywhere would join the
    # digits around it into strings the page never showed (a hex string losing its 1s can become
    # a forbidden short id).
    for typed in (typed for typed in visit.typed if len(typed) >= SHORTEST_NEEDLE):
        for echo in {typed, html.escape(typed), quote(typed), quote_plus(typed)}:
            text = text.replace(echo, "")
    found += [f"{what} ({needle})" for needle, what in world.needles.items() if needle in text]
    if CONFIGURATION.match(visit.url):  # the queue is named, its reviews are not counted
        found += [f"the vault queue's figures ({figure.group(0)[-80:]!r})"
                  for pattern in VAULT_FIGURES if (figure := pattern.search(text))]
    else:  # anywhere else its name is one of its figures' (the index's, the queues page's)
        found += [f"the vault queue's name ({name})" for name in (VAULT, VAULT_NAME)
                  if name in text and name not in visit.typed]
    return found


def send(browser: Client, visit: Visit, world: World, url: str | None = None):
    url = url or visit.url
    if visit.method == "GET":
        return browser.get(url)
    # The version a write checks is the named review's own: the form would act if let through.
    named = next((r for r in world.forbidden if str(r.pk) in url), None)
    version = ContentReview.objects.get(pk=named.pk).version if named else 1
    return browser.post(url, {**posted(world), "version": str(version)})


def walk(browser: Client, world: World) -> dict[Visit, tuple[int, list[str]]]:
    """Each visit's status and what it showed of the forbidden reviews; a visit of a row of one
    that is refused is refused as its twin, naming no row, is (else `twin_status` says so)."""
    answers = {}
    for visit in visits(world):
        response = send(browser, visit, world)
        found = shown(response, visit, world)
        if visit.twin and response.status_code != 200:
            alike = send(browser, visit, world, visit.twin).status_code
            if alike != response.status_code:
                found.append(f"a refusal ({response.status_code}) unlike a missing row's ({alike}): the row exists")
        answers[visit] = (response.status_code, found)
    version = services.policy_active().version
    for url, form in previews(world, version):
        visit = Visit("POST", url, typed=tuple(str(v) for v in form.values() if v))
        response = browser.post(url, form)
        answers[visit] = (response.status_code, shown(response, visit, world))
    return answers


def browser_of(user) -> Client:
    browser = Client(raise_request_exception=False)
    browser.force_login(user)
    return browser


def state(world: World) -> list[tuple]:
    """What a moderator's write would change on a forbidden review."""
    return [(r.status, r.version, r.leased_to_id, r.decision_id, r.notes.count(), r.appeals.count())
            for r in ContentReview.objects.filter(pk__in=[f.pk for f in world.forbidden]).order_by("pk")]


# --- the tests ------------------------------------------------------------------------------------

def test_a_moderator_outside_the_queues_group_meets_nothing_of_its_reviews_on_any_admin_url(
    world, django_user_model
):
    before = state(world)
    problems = []
    for role in ROLES:
        browser = browser_of(staff(django_user_model, f"outsider-{role}", role))
        answers = walk(browser, world)
        problems += [f"{role}: {visit.method} {visit.url} ({status}): {', '.join(what)}"
                     for visit, (status, what) in answers.items() if what]
        problems += [f"{role}: {visit.method} {visit.url}: {status}"
                     for visit, (status, _) in answers.items() if status >= 500]
        assert state(world) == before, f"{role} changed a forbidden review"
    assert not problems, "\n".join(problems)


def test_a_member_of_the_queues_group_meets_all_of_it_on_the_same_walk(world, django_user_model):
    member = django_user_model.objects.get(username="member-one")
    answers = walk(browser_of(member), world)
    seen = Counter(what.split(" (")[0] for _, (_, found) in answers.items() for what in found)
    expected = {what for what in world.needles.values()} | {"the image's bytes", "the image's thumbnail",
                                                            "the vault queue's name", "the vault queue's figures"}
    assert expected <= set(seen), expected - set(seen)
    assert not [visit for visit, (status, _) in answers.items() if status >= 500]


def test_a_members_note_and_decision_go_through_with_the_walks_form(world, django_user_model):
    """The form the walk posts is one the views take: refused to an outsider, it is the check."""
    member = browser_of(django_user_model.objects.get(username="member-two"))
    waiting = world.forbidden[0]
    data = {**posted(world), "version": str(ContentReview.objects.get(pk=waiting.pk).version)}
    assert member.post(f"/admin/moderation/contentreview/{waiting.pk}/note/", data).status_code == 302
    assert ModeratorNote.objects.filter(review=waiting, text__startswith=f"{MARK} a note the walk posted").exists()
    member.post(f"/admin/moderation/contentreview/{waiting.pk}/act/override/", data)
    assert ContentReview.objects.get(pk=waiting.pk).status == ReviewStatus.APPROVED


def test_the_index_counts_only_the_reviews_a_moderator_may_see(world, django_user_model, settings):
    # One of the vault's reviews sent to the model again, and its operation gone silent: stuck.
    left = world.forbidden[1]
    services.review_reprocess(review_id=left.pk, actor="admin", actor_id="walk", reason="again")
    silent_for(services.review_claim(review_id=left.pk, worker_id="w"), settings.MODERATION_STUCK_AFTER_S + 60)
    everyone = Counter(ContentReview.objects.values_list("status", flat=True))
    outside = everyone - Counter(ContentReview.objects.filter(pk__in=[r.pk for r in world.forbidden])
                                 .values_list("status", flat=True))
    for user, counts, stuck in ((staff(django_user_model, "outsider", "moderator"), outside, 0),
                                (django_user_model.objects.get(username="member-two"), everyone, 1)):
        page = browser_of(user).get("/admin/").content.decode()
        shown_counts = {status: int(n) for status, n in re.findall(r'id="count-(\w+)">(\d+)<', page)}
        assert shown_counts == {**{status: counts.get(status, 0) for status in ReviewStatus.values},
                                "stuck": stuck}, user



def test_the_index_figures_of_the_moderators_work_leave_out_what_a_moderator_may_not_see(world, django_user_model):
    """Decisions per moderator, overturns and time in queue: the vault's count for its members only."""
    vault = ApiClient.objects.get(name="vault-client")
    rejected, _ = services.review_submit(client=vault, external_id=f"{MARK}-overturned", kind="text",
                                         text=f"{MARK} rejected by the model, approved on appeal")
    request = services.review_claim(review_id=rejected.pk, worker_id="w")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.95), cause="provider_result")
    services.appeal_file(review_id=rejected.pk, appellant_id="appellant-2", statement="it was fine")
    services.review_override(review_id=rejected.pk, label="approved", reason="fine after all",
                             moderator=django_user_model.objects.get(username="member-two"))
    outsider = dashboard_figures(viewer=staff(django_user_model, "outsider", "moderator"))
    member = dashboard_figures(viewer=django_user_model.objects.get(username="member-two"))
    assert member["decisions_per_moderator"] and member["overturns"] and member["time_in_review_queue"]
    assert [outsider[figure] for figure in ("decisions_per_moderator", "overturns", "time_in_review_queue")] == [[]] * 3
