"""The policy page shows what moving a threshold costs with the local model: precision, recall and
the share flagged at each threshold, as `make model` measured them on the held-out split and
stored them in the model file; the version's own thresholds marked ("≈" between two rows), to
every role that may read the version (moderation/admin/operating_points.py)."""

from __future__ import annotations

import json
import re
from html import unescape

import numpy as np
import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moderation import services
from moderation.admin import csp
from moderation.admin.operating_points import SAME_THRESHOLD, nearest
from moderation.models import ModerationPolicy
from moderation.providers.local import CATEGORIES
from moderation.providers.local_model import MODEL_PATH, OperatingPoint
from tests.helpers import examples, staff_browser

pytestmark = pytest.mark.django_db


def stored_points() -> dict:
    """The operating points as the model file holds them, read without the code under test."""
    with np.load(MODEL_PATH, allow_pickle=False) as stored:
        return json.loads(str(stored["meta"]))["operating_points"]


def page(browser: Client, policy: ModerationPolicy) -> str:
    response = browser.get(f"/admin/moderation/moderationpolicy/{policy.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def row_of(html: str, category: str, threshold: str) -> dict:
    """The cells of one row of a category's table, by class, as text."""
    found = re.search(rf'<tr id="operating-point-{category}-{re.escape(threshold)}"(?P<attrs>[^>]*)>(?P<body>.*?)</tr>',
                      html, re.S)
    assert found, (category, threshold)
    cells = dict(re.findall(r'<t[hd][^>]*class="([\w-]+)"[^>]*>(.*?)</t[hd]>', found["body"], re.S))
    return {name: unescape(re.sub(r"<[^>]+>", "", text)).strip() for name, text in cells.items()} | {
        "marked": 'class="marked"' in found["attrs"]}


def publish(**thresholds) -> ModerationPolicy:
    active = services.policy_active()
    return services.policy_publish(**{**services.policy_fields(active), **thresholds}, notes="thresholds moved")


@pytest.fixture
def superuser(django_user_model) -> Client:
    browser = Client()
    browser.force_login(django_user_model.objects.create_superuser("boss", password="pw-long-enough-1"))
    return browser


def test_each_category_has_a_table_with_the_model_files_figures(local, superuser):
    stored = stored_points()
    response = superuser.get(f"/admin/moderation/moderationpolicy/{services.policy_active().pk}/change/")
    html = response.content.decode()

    # Within the admin's Content-Security-Policy: no inline script or style of its own.
    assert response.status_code == 200 and response[csp.HEADER] == csp.policy()
    panel = re.search(r'<fieldset class="module operating-points".*?</fieldset>', html, re.S)[0]
    assert not re.search(r"<script|<style|\sstyle=|\son\w+=", panel)

    assert set(stored) == set(CATEGORIES)
    for category, found in stored.items():
        assert f'id="operating-points-{category}"' in html
        assert f"{found['texts']} held-out texts, {found['positives']} of them {category}" in html
        for threshold, precision, recall, share in found["points"][::6]:  # 0.05, 0.35, 0.65, 0.95
            cells = row_of(html, category, f"{threshold:.2f}")
            assert cells["precision"] == ("—" if precision is None else f"{precision:.2f}"), (category, threshold)
            assert cells["recall"] == f"{recall:.2f}", (category, threshold)
            assert cells["share"] == f"{share:.1%}", (category, threshold)
    assert "held-out split of the model's own training data" in html and "docs/model-card.md" in html


def test_precision_and_recall_are_not_swapped_on_the_page(local, superuser):
    # At a high threshold the model is precise and misses much: the columns must say so.
    html = page(superuser, services.policy_active())
    stored = stored_points()["profanity"]["points"]
    _, precision, recall, _ = next(p for p in stored if p[0] == 0.9)
    assert precision > recall + 0.1  # the shipped model's figures; the page must keep them apart
    cells = row_of(html, "profanity", "0.90")
    assert (cells["precision"], cells["recall"]) == (f"{precision:.2f}", f"{recall:.2f}")


def test_the_versions_own_thresholds_are_marked_exactly_or_nearest(local, superuser):
    policy = publish(category_thresholds={"insult": {"review": 0.3, "reject": 0.7},
                                          "threat": {"review": 0.33, "reject": 0.68}},
                     review_threshold=0.5, reject_threshold=0.9)
    html = page(superuser, policy)

    assert row_of(html, "insult", "0.30")["policy-mark"] == "review 0.3"
    assert row_of(html, "insult", "0.70")["policy-mark"] == "reject 0.7"
    assert row_of(html, "threat", "0.35")["policy-mark"] == "≈ review 0.33"
    assert row_of(html, "threat", "0.70")["policy-mark"] == "≈ reject 0.68"
    assert row_of(html, "threat", "0.30")["policy-mark"] == "" and not row_of(html, "threat", "0.30")["marked"]
    assert row_of(html, "threat", "0.35")["marked"]
    # A category without an override takes the version's own review and reject thresholds.
    assert row_of(html, "hate", "0.50")["policy-mark"] == "review 0.5"
    assert row_of(html, "hate", "0.90")["policy-mark"] == "reject 0.9"
    marks = re.findall(r'class="policy-mark">(.*?)</td>', html)
    assert len([m for m in marks if m]) == 2 * len(CATEGORIES)
    # The summary line reads off the marked row's figures.
    point = next(p for p in stored_points()["threat"]["points"] if p[0] == 0.35)
    assert f"Review 0.33: ≈ row 0.35, precision {point[1]:.2f}, recall {point[2]:.2f}" in unescape(html)


def test_a_version_published_under_the_models_first_names_marks_its_thresholds_on_insult_and_threat(local, superuser):
    # Version 1 of the model called insults `harassment` and threats `violence`: a version
    # published then is never edited, and its thresholds still stand for the renamed categories.
    policy = publish(category_thresholds={"harassment": {"review": 0.3, "reject": 0.7}, "violence": {"review": 0.45, "reject": 0.8}},
                     review_threshold=0.5, reject_threshold=0.9)
    html = page(superuser, policy)

    assert row_of(html, "insult", "0.30")["policy-mark"] == "review 0.3"
    assert row_of(html, "insult", "0.70")["policy-mark"] == "reject 0.7"
    assert row_of(html, "threat", "0.45")["policy-mark"] == "review 0.45"
    assert row_of(html, "threat", "0.80")["policy-mark"] == "reject 0.8"
    assert 'id="operating-points-harassment"' not in html  # the model scores no such category


def test_the_page_reads_the_model_files_figures_without_its_weights(local, superuser, monkeypatch):
    from moderation.providers import local as local_provider

    read = []
    member = np.lib.npyio.NpzFile.__getitem__

    def recorded(self, key):
        read.append(key)
        return member(self, key)

    monkeypatch.setattr(np.lib.npyio.NpzFile, "__getitem__", recorded)
    monkeypatch.setattr(local_provider, "_model", None)  # as in a web process that never scored a text
    html = page(superuser, services.policy_active())

    assert 'id="operating-points-insult"' in html and read == ["meta"]
    assert local_provider._model is None  # nor is the model kept for later


def test_an_auditor_and_every_other_reader_see_the_table(local, django_user_model):
    policy = services.policy_active()
    _, precision, recall, _ = next(p for p in stored_points()["insult"]["points"] if p[0] == 0.5)
    for role in ("auditor", "moderator", "supervisor"):
        cells = row_of(page(staff_browser(django_user_model, f"{role}-1", role), policy), "insult", "0.50")
        assert (cells["precision"], cells["recall"]) == (f"{precision:.2f}", f"{recall:.2f}"), role


def test_the_form_of_a_new_version_marks_the_thresholds_it_starts_from(local, superuser):
    publish(category_thresholds={"insult": {"review": 0.3, "reject": 0.75}})
    response = superuser.get("/admin/moderation/moderationpolicy/add/")

    assert response.status_code == 200
    html = response.content.decode()
    assert row_of(html, "insult", "0.30")["policy-mark"] == "review 0.3"
    assert row_of(html, "insult", "0.75")["policy-mark"] == "reject 0.75"
    assert "this form's starting point" in unescape(html)


def test_another_provider_shows_no_table_and_says_why(settings, superuser):
    settings.MODERATION_PROVIDER = "openai"
    html = page(superuser, services.policy_active())

    assert 'id="operating-point-' not in html and 'id="operating-points-none"' in html
    assert "this installation's provider is openai" in unescape(html)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=len(CATEGORIES) + 1,
                      max_size=len(CATEGORIES) + 1))
def test_the_page_opens_for_any_thresholds_and_marks_each_one_in_range(local, superuser, pairs):
    (review, reject), *own = [sorted(pair) for pair in pairs]
    policy = publish(review_threshold=review, reject_threshold=reject,
                     category_thresholds={c: {"review": r, "reject": j} for c, (r, j) in zip(CATEGORIES, own, strict=True)})
    html = unescape(page(superuser, policy))

    for category, (r, j) in zip(CATEGORIES, own, strict=True):
        block = re.search(rf'<details [^>]*id="operating-points-{category}">(.*?)</details>', html, re.S)[1]
        marks = " ".join(re.findall(r'class="policy-mark">(.*?)</td>', block))
        for kind, value in (("review", r), ("reject", j)):
            if 0.05 - SAME_THRESHOLD <= value <= 0.95 + SAME_THRESHOLD:
                assert re.search(rf"<strong>(≈ )?{kind} {re.escape(f'{value:g}')}</strong>", marks), (category, kind, value)
            else:
                assert f"{kind} {value:g}: beyond the table's rows" in block.lower(), (category, kind, value)
                assert f"{kind} {value:g}</strong>" not in marks


POINTS = tuple(OperatingPoint(round(0.05 * k, 2), None, None, None) for k in range(1, 20))


@pytest.mark.parametrize(("threshold", "row", "exact"), [
    (0.3, 0.3, True), (0.30000000000000004, 0.3, True), (0.33, 0.35, False), (0.31, 0.3, False),
    (0.05, 0.05, True), (0.95, 0.95, True), (0.04, None, False), (0.99, None, False), (0.0, None, False)])
def test_the_nearest_row_stands_for_a_threshold_between_two_rows(threshold, row, exact):
    found, is_exact = nearest(POINTS, threshold)
    assert (found.threshold if found else None, is_exact) == (row, exact)
