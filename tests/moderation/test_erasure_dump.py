"""Erasure removes moderators' words (docs/design.md, invariant 16), checked as an auditor would
check it: a `pg_dump` of the whole database after `erase_content --for-real` holds neither the
content's phone number and surname, quoted in a moderator's reason, nor a name planted only in a
moderator's note, in any table (decision, transition log, outbox, statements, history...)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from glob import glob
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from rest_framework.test import APIClient

from moderation import services
from moderation.models import ERASED, Author, ContentReview, DecisionNotification, TransparencyStatement
from tests.helpers import SCORE_FOR, result

PHONE = "+48601234567"
SURNAME = "Kowalski"
PLANTED = "Zbyszk"  # a 6-character name, written in moderators' notes only
TEXT = f"you moron, call Jan {SURNAME} on {PHONE} tonight"
REASON = f"doxxing: Jan {SURNAME} {PHONE}"
NEEDLES = (PHONE, PHONE.lstrip("+"), SURNAME, PLANTED)
AUTHOR_ID = "author-77"


def pg_dump_binary() -> str:
    """The pg_dump of the server the tests are connected to: the same major version, from the
    embedded server's package (pgserver, config/embedded_db.py), the system's PostgreSQL or PATH;
    failing that, a newer one (pg_dump reads older servers, never newer ones)."""
    server = connection.pg_version // 10000
    spec = importlib.util.find_spec("pgserver")  # (found, not imported: importing it warns)
    bundled = [str(Path(place) / "pginstall" / "bin" / "pg_dump") for place in spec.submodule_search_locations] if spec else []
    candidates = [*bundled, *sorted(glob("/usr/lib/postgresql/*/bin/pg_dump")), shutil.which("pg_dump") or ""]
    found = {}
    for path in filter(os.path.isfile, candidates):
        version = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
        if match := re.search(r"(\d+)(?:\.\d+)?", version):
            found.setdefault(int(match.group(1)), path)
    usable = sorted(major for major in found if major >= server)  # the server's own first
    assert usable, f"no pg_dump for PostgreSQL {server} (found {found})"
    return found[usable[0]]


def pg_dump() -> str:
    """The whole test database as pg_dump writes it, reached as the tests' own connection reaches
    it (host or socket directory, port, user: the embedded server's socket is an option of its URL)."""
    connection.ensure_connection()
    info = connection.connection.info
    command = [pg_dump_binary(), "--no-owner", "--no-privileges", "-d", info.dbname, "-h", info.host,
               "-p", str(info.port), "-U", info.user]
    env = {**os.environ, **({"PGPASSWORD": info.password} if info.password else {})}
    dumped = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert dumped.returncode == 0, dumped.stderr
    assert "CREATE TABLE public.moderation_decision" in dumped.stdout
    return dumped.stdout


def holding(dump: str) -> dict[str, list[str]]:
    """Each needle the dump holds, with the tables whose data holds it (COPY blocks)."""
    tables, table = {}, "(schema)"
    for line in dump.splitlines():
        if line.startswith("COPY "):
            table = line.split()[1]
        for needle in NEEDLES:
            if needle in line:
                tables.setdefault(needle, [])
                if table not in tables[needle]:
                    tables[needle].append(table)
    return tables


@pytest.fixture
def moderators(db):
    users = get_user_model().objects
    return users.create_user("mod-a", is_staff=True), users.create_user("mod-b", is_staff=True)


def rejected_with_a_moderators_reason(api_client, moderator) -> ContentReview:
    """The provider rejects the text, a moderator rejects it again with a reason quoting it (sent
    to the user), with a note naming PLANTED, and another note after: the client is notified
    (the outbox) and the rejection has its statement of reasons."""
    api_client.webhook_url = "https://hooks.example.test/moderation"
    api_client.save(update_fields=["webhook_url"])
    review, _ = services.review_submit(client=api_client, external_id="doxx-1", kind="text", text=TEXT,
                                       author_id=AUTHOR_ID)
    request = services.review_claim(review_id=review.pk, worker_id="w1")
    assert services.review_finalize(idempotency_key=request.idempotency_key, result=result(SCORE_FOR["rejected"]),
                                    cause="provider_result") == "applied"
    services.review_override(review_id=review.pk, label="rejected", category="harassment", reason=REASON,
                             moderator=moderator, share_reason=True, note=f"{PLANTED} from support: same Jan {SURNAME}")
    services.review_note_add(review_id=review.pk, author=moderator, text=f"{PLANTED} called back")
    assert DecisionNotification.objects.filter(review=review).count() == 2
    assert TransparencyStatement.objects.filter(review=review).exists()
    return review


def reads(api_client, path: str) -> str:
    http = APIClient()
    http.credentials(HTTP_AUTHORIZATION=f"Bearer {api_client.token}")
    response = http.get(path)
    assert response.status_code == 200, response.content
    return response.content.decode()


@pytest.mark.django_db(transaction=True)
def test_after_erase_content_the_dump_holds_no_word_of_the_moderators_reason_or_notes(api_client, moderators):
    review = rejected_with_a_moderators_reason(api_client, moderators[0])
    before = holding(pg_dump())
    # The test can fail: every needle is in the dump, the reason's in several tables.
    assert set(before) == set(NEEDLES), before
    assert {"public.moderation_decision", "public.audit_reviewtransition",
            "public.moderation_decisionnotification"} <= set(before[PHONE]), before
    assert PHONE in reads(api_client, f"/api/v1/reviews/{review.pk}/")

    call_command("erase_content", str(review.pk), "--reason", "GDPR request #90", "--by", "ops-anna", "--for-real")

    assert holding(pg_dump()) == {}
    page = reads(api_client, f"/api/v1/reviews/{review.pk}/")
    assert not any(needle in page for needle in NEEDLES), page
    assert ERASED in page  # the explanation says the words were erased
    # The erasure's own record stays, and the decision is still explained by who and which policy.
    review.refresh_from_db()
    assert (review.erasure.actor_id, review.erasure.reason) == ("ops-anna", "GDPR request #90")
    assert review.decision.moderator == moderators[0] and review.decision.policy_id is not None
    assert review.decision.category == "harassment"


@pytest.mark.django_db(transaction=True)
def test_after_erasing_an_author_the_dump_holds_no_word_of_its_actions_appeals_or_notes(api_client, moderators):
    review = rejected_with_a_moderators_reason(api_client, moderators[0])
    author = Author.objects.get(client=api_client, author_id=AUTHOR_ID)
    action = services.author_act(author_pk=author.pk, moderator=moderators[0], action="suspend", days=7,
                                 reason=f"{REASON}, again")
    appeal = services.account_appeal_file(client=api_client, author_id=AUTHOR_ID,
                                          statement=f"{PLANTED} is my brother, {SURNAME} is not me")
    services.account_appeal_resolve(appeal_id=appeal.pk, moderator=moderators[1], outcome="upheld",
                                    reason=f"{PLANTED}'s story does not hold: {PHONE} is on the profile")
    before = holding(pg_dump())
    assert {"public.moderation_accountaction", "public.moderation_standingtransition",
            "public.moderation_accountappeal"} <= set(before[PHONE]) | set(before[PLANTED]), before

    call_command("erase_content", "--author", AUTHOR_ID, "--client", api_client.name, "--reason", "GDPR request #91",
                 "--for-real")

    assert holding(pg_dump()) == {}
    for path in (f"/api/v1/reviews/{review.pk}/", f"/api/v1/authors/{AUTHOR_ID}/"):
        page = reads(api_client, path)
        assert not any(needle in page for needle in NEEDLES), page
    action.refresh_from_db()
    assert (action.action, action.reason) == ("suspend", ERASED)  # the fact stays, the words go
