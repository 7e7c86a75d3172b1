"""Every admin page, for every role, over hostile content: no 5xx, no injection unescaped, and
the admin's Content-Security-Policy on each (moderation/admin/csp.py).

A database is seeded through the services with what clients and moderators can send: emoji-only,
bidi, zero-width and combining texts, a 100,000-character text, HTML and script injections in
texts, metadata, reports, appeals, notes and names, a policy with a `re:` pattern rule and an
allow rule, an erased review, 320 reports on one review (its pages are paged) by reporters named
like injections, muted and unmuted with hostile reasons, and authors named like injections with
strikes, a suspension and its appeal. Then each
role (moderation/roles.py, and a superuser) opens the admin index and follows every link it
finds under /admin/ (changelists and their filters, a few change and history pages of each
model, the queues, the review pages, the term editor), plus each seeded review's pages, and
previews a term-list change with a dry run over the seeded texts.
"""

from __future__ import annotations

import re
from collections import Counter
from decimal import Decimal
from html import unescape
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from moderation import roles, services
from moderation.privacy.erasure import content_erase
from moderation.models import (
    Author,
    ContentReview,
    PileOn,
    Report,
    Reporter,
    StatementStatus,
    TransparencyStatement,
)
from tests.helpers import result

pytestmark = pytest.mark.django_db

# Strings that must never reach a page as written: each page escapes them.
INJECTIONS = ['<script>alert("xss-1")</script>', '"><img src=x onerror=alert("xss-2")>',
              "<svg/onload=alert('xss-3')>", "</textarea><b>xss-4</b>"]
ZALGO = "Z\u0337\u0322\u0349a\u0338\u0321l\u0334\u0354g\u0335\u0356o\u0336\u0353" * 20
# (external id, text, score): each becomes a review; its score sets where it ends.
SEEDS = [
    ("bidi", "\u202Eevil\u202C \u2067isolated\u2069 \u200Fright-to-left\u200E idiot", 0.6),
    ("zero-width", "id\u200Biot\u200C \u200Dspam\uFEFF \u2060free\u00AD money", 0.95),
    ("combining", ZALGO, 0.1),
    ("long", ("free money idiot " * 6_000)[:100_000], 0.6),
    ("injection", " ".join(INJECTIONS) + " idiot", 0.6),
    ("pattern", "click http://fr33-m0ney.example now", 0.6),
    ("allowed", "the word scunthorpe is a town", 0.1),
    ("mixed", "Ｆｒｅｅ ｍｏｎｅｙ \u0456d\u0456ot " + INJECTIONS[0], 0.95),
    ("reported", "a popular post " + INJECTIONS[1], 0.1),
    # Wordless texts under term rules, and texts a re: rule does not match: each crashed the
    # matcher before issue 22 (a 500 on every page that shows them).
    ("emoji", "\U0001F600\U0001F4A9\U0001F680 \U0001F1FA\U0001F1E6 \U0001F468\u200D\U0001F469\u200D\U0001F467", 0.6),
    ("empty-words", "   \t\n  ", 0.1),
]
# re: terms of the active policy and of the dry run.
PATTERNS = [r"re:fr[e3]{2}-?m[o0]ney", "re:[\u202E-\u202F]+"]
POLICY_RULES = [
    {"category": "harassment", "action": "reject", "language": "", "terms": ["idiot", "ｉｄｉｏｔ"]},
    {"category": "spam", "action": "manual_review", "language": "", "terms": ["free money", INJECTIONS[0], *PATTERNS]},
    {"category": "harassment", "action": "allow", "language": "", "terms": ["scunthorpe"]},
]
REPORTS_ON_ONE_REVIEW = 320
ROLES = ["superuser", *roles.ROLES]  # every group moderation/roles.py sets up, and a superuser
# Pages a crawl opens per URL shape (ids and query values replaced): a few objects of each
# model, a few filter combinations of each list. The seeded reviews' pages are opened besides.
PER_SHAPE = 2
NEVER = re.compile(r"/logout/|/password_change/|/delete/|/jsi18n/|^/admin/r/")
# What every admin page's Content-Security-Policy holds at least (moderation/admin/csp.py).
CSP_DIRECTIVES = ("default-src 'self'", "object-src 'none'", "frame-ancestors 'none'", "base-uri 'none'")


@pytest.fixture
def hostile(django_user_model, api_client):
    fields = services.policy_fields(services.policy_active())
    services.policy_publish(**{**fields, "term_lists": POLICY_RULES[1:2]}, notes=INJECTIONS[1])
    services.policy_publish(**{**fields, "term_lists": POLICY_RULES}, notes=INJECTIONS[2])
    author = django_user_model.objects.create_user(INJECTIONS[3][:150], is_staff=True)
    reviews = {}
    for external_id, text, score in SEEDS:
        review, _ = services.review_submit(client=api_client, external_id=external_id + INJECTIONS[1], kind="text",
                                           text=text, metadata={INJECTIONS[0]: [INJECTIONS[1], {"k": ZALGO}]})
        request = services.review_claim(review_id=review.pk, worker_id=INJECTIONS[2])
        services.review_finalize(idempotency_key=request.idempotency_key, result=result(score), cause="provider_result")
        services.review_note_add(review_id=review.pk, author=author, text=f"{text[:500]} {INJECTIONS[3]}")
        reviews[external_id] = review
    services.review_submit(client=api_client, external_id="pending", kind="image",
                           media_url="https://cdn.example.org/" + "%3Cscript%3E" + "a" * 100)
    services.review_override(review_id=reviews["zero-width"].pk, label="rejected", reason=INJECTIONS[0],
                             category="spam", note=INJECTIONS[1], moderator=author)
    services.appeal_file(review_id=reviews["zero-width"].pk, appellant_id=INJECTIONS[2], statement=ZALGO + INJECTIONS[0])
    for i in range(REPORTS_ON_ONE_REVIEW):
        services.report_file(review_id=reviews["reported"].pk, reporter_id=f"{INJECTIONS[3]}-{i}",
                             reason="spam", detail=f"{INJECTIONS[i % len(INJECTIONS)]} \u202E{i}")
    # The reports queue's columns and the review page's summary: weights, a pile-on mark, hostile
    # reasons (the service stores what the API's serializer would refuse) on a second reported review.
    Report.objects.filter(review=reviews["reported"], reporter_id__endswith="7").update(weight=Decimal("0.5"))
    ContentReview.objects.filter(pk=reviews["reported"].pk).update(pile_on=PileOn.BURST)
    piled, _ = services.review_submit(client=api_client, external_id="piled-on" + INJECTIONS[0], kind="text",
                                      text="a post many report at once " + INJECTIONS[2])
    request = services.review_claim(review_id=piled.pk, worker_id="w1")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.1), cause="provider_result")
    for i, reason in enumerate([INJECTIONS[0], INJECTIONS[1][:64], INJECTIONS[0], "\u202Espam\u200D", "other"]):
        services.report_file(review_id=piled.pk, reporter_id=f"{INJECTIONS[2]}-{i}", reason=reason, detail=ZALGO,
                             kind="trusted_flagger" if i == 4 else "user")
    ContentReview.objects.filter(pk=piled.pk).update(pile_on=PileOn.LOW_ACCURACY)
    reviews["piled-on"] = piled
    # Reporters: the 320 above (named like an injection), one rated and muted by the rule, one a
    # moderator muted with an injection for a reason, one unmuted with a bidi reason.
    noisy, held, freed = (Reporter.objects.get(reporter_id=f"{INJECTIONS[3]}-{i}") for i in range(3))
    Reporter.objects.filter(pk=noisy.pk).update(resolved=40, actioned=1)  # as report_outcomes counts them
    services.reporter_mute(reporter_pk=held.pk, muted=True, reason=INJECTIONS[0] + ZALGO, user=author)
    services.reporter_mute(reporter_pk=freed.pk, muted=False, reason="\u202Eevil\u202C " + INJECTIONS[2], user=author)
    content_erase(review_id=reviews["bidi"].pk, actor="admin", actor_id=INJECTIONS[0], reason=INJECTIONS[1])
    # An author named like an injection, with strikes, one overturned, an action by a moderator
    # and an appeal of it; and an author whose id is bidi and emoji.
    for text in (INJECTIONS[2], ZALGO, "idiot " + INJECTIONS[3]):
        review, _ = services.review_submit(client=api_client, external_id=text[:40] + "-by-author", kind="text",
                                           text=text, author_id=INJECTIONS[0])
        request = services.review_claim(review_id=review.pk, worker_id="w1")
        services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.95), cause="provider_result")
    services.review_override(review_id=review.pk, label="approved", reason=INJECTIONS[1], moderator=author)
    hostile_author = Author.objects.get(author_id=INJECTIONS[0])
    services.author_act(author_pk=hostile_author.pk, moderator=author, action="suspend", days=3, reason=INJECTIONS[2])
    services.account_appeal_file(client=api_client, author_id=INJECTIONS[0], statement=ZALGO + INJECTIONS[1])
    services.review_submit(client=api_client, external_id="bidi-author", kind="text", text=INJECTIONS[3],
                           author_id="\u202Eevil\u202C \U0001F468\u200D\U0001F469\u200D\U0001F467")
    # A statement of reasons the Transparency Database refused, with hostile errors (its text, not ours).
    assert TransparencyStatement.objects.filter(review=reviews["zero-width"]).update(
        status=StatementStatus.REJECTED, errors={"statement_0": {INJECTIONS[0]: [INJECTIONS[1], ZALGO]}},
        last_error=INJECTIONS[2]) == 1
    return reviews


def browser_for(role: str, django_user_model) -> Client:
    if role == "superuser":
        user = django_user_model.objects.create_superuser(f"crawler-{role}", password="pw-long-enough-1")
    else:
        user = django_user_model.objects.create_user(f"crawler-{role}", password="pw-long-enough-1", is_staff=True)
        user.groups.add(Group.objects.get(name=role))
    browser = Client(raise_request_exception=False)
    browser.force_login(user)
    return browser


def shape(url: str) -> str:
    """The URL with its ids and query values replaced: pages of one shape show one template."""
    path, _, query = url.partition("?")
    path = re.sub(r"/[0-9a-f-]{36}/|/\d+/", "/<id>/", path)
    keys = sorted(set(re.findall(r"([^&=]+)=", query)) - {"_changelist_filters"})  # the list it came from
    return path + ("?" + "&".join(keys) if keys else "")


def combined(url: str) -> bool:
    """Whether `url` combines several filters, sort orders or list states: a crawl opens each
    one alone (every combination of a list's filters would be thousands of pages)."""
    return len(re.findall(r"([^&=?]+)=", urlsplit(url).query)) > 1


def links(html: str, base: str) -> list[str]:
    found = []
    for href in re.findall(r'href="([^"]+)"', html):
        url = urldefrag(urljoin(base, unescape(href)))[0]
        parts = urlsplit(url)
        if not parts.netloc and parts.path.startswith("/admin/") and not NEVER.search(parts.path):
            found.append(parts.path + (f"?{parts.query}" if parts.query else ""))
    return found


def problems_of(url: str, response) -> list[str]:
    if response.status_code >= 500:
        return [f"{url}: {response.status_code}"]
    if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
        return []
    html = response.content.decode()
    csp = response.get("Content-Security-Policy", "")
    problems = [f"{url}: no {directive!r} in its Content-Security-Policy {csp!r}"
                for directive in CSP_DIRECTIVES if directive not in csp]
    if "script-src 'self'" not in csp or "'unsafe-inline'" in csp.split("script-src")[1].split(";")[0]:
        problems.append(f"{url}: scripts not held to files and a nonce: {csp!r}")
    return problems + [f"{url}: unescaped {needle!r}" for needle in INJECTIONS if needle in html]


def crawl(browser: Client, start: list[str]) -> tuple[list[str], set[str]]:
    """Open `start`, then every admin link found, PER_SHAPE pages of each shape; return the
    problems and the pages opened."""
    queue, seen, per_shape, problems = list(start), set(), Counter(), []
    forced = set(start)
    while queue:
        url = queue.pop(0)
        if url in seen or (url not in forced and (combined(url) or per_shape[shape(url)] >= PER_SHAPE)):
            continue
        seen.add(url)
        per_shape[shape(url)] += 1
        response = browser.get(url)
        problems += problems_of(url, response)
        if response.status_code == 200 and "html" in response.get("Content-Type", ""):
            queue += links(response.content.decode(), url)
    return problems, seen


def test_every_admin_page_opens_for_every_role_over_hostile_content(hostile, django_user_model):
    reviews = ContentReview.objects.values_list("pk", flat=True)
    reported = hostile["reported"].pk
    start = ["/admin/", *[f"/admin/moderation/contentreview/{pk}/{page}/" for pk in reviews
                          for page in ("timeline", "change")],
             *[f"/admin/moderation/author/{pk}/change/" for pk in Author.objects.values_list("pk", flat=True)],
             "/admin/moderation/author/?q=" + INJECTIONS[0],
             *[f"/admin/moderation/reporter/{pk}/change/" for pk in Reporter.objects.order_by("pk")
               .values_list("pk", flat=True)[:3]],
             "/admin/moderation/reporter/?q=" + INJECTIONS[3] + "-1", "/admin/moderation/reporter/?muted=moderator",
             f"/admin/moderation/contentreview/{reported}/timeline/?timeline_page=4&reports_page=7",
             f"/admin/moderation/contentreview/{reported}/change/?reports_page=7",
             "/admin/moderation/contentreview/?q=" + INJECTIONS[0], "/admin/moderation/contentreview/?q=%F0%9F%98%80",
             "/admin/moderation/contentreview/queues/?queue=reports", "/admin/moderation/contentreview/queues/?queue=notices",
             "/admin/moderation/moderationpolicy/notices/"]
    problems, seen = [], {}
    for role in ROLES:
        browser = browser_for(role, django_user_model)
        found, seen[role] = crawl(browser, start)
        problems += [f"{role}: {problem}" for problem in found]
        if role in ("superuser", "supervisor"):  # a term-list preview, its dry run over every seeded text
            preview = browser.post("/admin/moderation/moderationpolicy/terms/", {
                "base_version": services.policy_active().version, "category": INJECTIONS[0][:64], "action": "reject",
                "language": "", "mode": "add", "terms": "\n".join([INJECTIONS[1], "\U0001F600", *PATTERNS]),
                "dry_texts": "\n".join(text[:2000] for _, text, _ in SEEDS), "dry_last": 50,
                "notes": INJECTIONS[2],
            })
            problems += [f"{role}: {problem}" for problem in problems_of("term-list preview", preview)]
            assert preview.status_code == 200 and "Dry run" in preview.content.decode(), role
            # A notice preview with hostile templates, for a hostile review, and one with errors.
            for templates in ({"template_en": f"{INJECTIONS[0]} {{reasons}} {ZALGO}", "template_id": INJECTIONS[3]},
                              {"template_en": INJECTIONS[1] + " {reasons", "template_id": "{" + INJECTIONS[2] + "}"}):
                notice = browser.post("/admin/moderation/moderationpolicy/notices/", {
                    "base_version": services.policy_active().version, "review": hostile["zero-width"].short_id,
                    "notes": INJECTIONS[2], "preview": "1", **templates})
                problems += [f"{role}: {problem}" for problem in problems_of("notice preview", notice)]
                assert notice.status_code == 200 and ('id="notice-preview"' in notice.content.decode()
                                                      or "has no pair" in notice.content.decode()), role

    assert not problems, "\n".join(problems)
    for role, pages in seen.items():  # the crawl reached the lists, the custom pages, the policy versions
        paths = {urlsplit(url).path for url in pages}
        assert "/admin/moderation/contentreview/queues/?queue=reports" in pages, role
        assert "/admin/moderation/decision/transparency-report/" in paths, role  # linked from the index
        assert {"/admin/moderation/contentreview/queues/", "/admin/moderation/moderationpolicy/",
                "/admin/audit/reviewtransition/", "/admin/moderation/author/", "/admin/moderation/reporter/"} <= paths, role
        assert any(re.fullmatch(r"/admin/moderation/author/\d+/change/", p) for p in paths), role
        assert any(re.fullmatch(r"/admin/moderation/reporter/\d+/change/", p) for p in paths), role
        assert sum(re.fullmatch(r"/admin/moderation/moderationpolicy/\d+/change/", p) is not None for p in paths) >= 2
        if role != "moderator":  # statements of reasons: supervisors and auditors (moderation/roles.py)
            assert any(re.fullmatch(r"/admin/moderation/transparencystatement/\d+/change/", p) for p in paths), role
