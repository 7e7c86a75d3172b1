"""Routing rules in the pipeline and per-queue access by Django group: a rule sends a review to a
custom queue, and only that queue's groups' members may see it, take it with "Review next" or
decide it, on every path (docs/workplace.md, "Routing rules and queue access")."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import Client
from django.utils import timezone

from moderation import services
from moderation.errors import QueueForbidden
from moderation.models import ContentReview, ModerationPolicy, ModerationQueue, ReviewQueue, ReviewStatus
from moderation.observability import workplace
from moderation.observability.routing_dry_run import routing_dry_run
from tests.helpers import collide, result

LIST = "/admin/moderation/contentreview/"
QUEUES = f"{LIST}queues/"
ROUTING = "/admin/moderation/moderationpolicy/routing/"
INDONESIAN = "Saya tidak suka dengan komentar kamu yang sangat kasar itu"
ENGLISH = "you are a complete fool and totally useless"
RULE = {"name": "Indonesian reports", "queue": "reports-id", "when": {"language": ["id"], "report_kind": ["user"]}}


def reported(client, text: str, n: int = 0) -> ContentReview:
    """A text the model approved that three users then reported: it goes to a human."""
    review, _ = services.review_submit(client=client, external_id=f"r-{n}-{abs(hash(text))}", kind="text", text=text)
    request = services.review_claim(review_id=review.pk, worker_id="w")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.1), cause="provider_result")
    for i in range(3):
        services.report_file(review_id=review.pk, reporter_id=f"{review.short_id}-u{i}", reason="harassment")
    review.refresh_from_db()
    assert review.status == ReviewStatus.MANUAL_REVIEW
    return review


def routed_to_a_group_queue() -> Group:
    """The queue "reports-id", for the group "indonesian" only, and the rule sending there."""
    group = Group.objects.create(name="indonesian")
    services.review_queue_save(queue_id=None, slug="reports-id", name="Indonesian reports", groups=[group])
    # The model judges Indonesian too: an approved Indonesian text, reported, goes to a human.
    services.policy_publish_change(lambda active: {"routing_rules": [RULE], "model_languages": ["en", "id"]})
    return group


def staff(django_user_model, name: str, *groups: str):
    user = django_user_model.objects.create_user(name, password="pw-long-enough-1", is_staff=True)
    user.groups.add(*Group.objects.filter(name__in=["moderator", *groups]))
    return user


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def setup(db, api_client, django_user_model):
    routed_to_a_group_queue()
    ina, sam = staff(django_user_model, "ina", "indonesian"), staff(django_user_model, "sam")
    return ina, sam, reported(api_client, INDONESIAN), reported(api_client, ENGLISH)


@pytest.mark.django_db
class TestRouting:
    def test_an_indonesian_report_waits_in_the_group_queue_and_an_english_one_in_user_reports(self, setup):
        _, _, indonesian, english = setup
        assert (indonesian.content.language, indonesian.queue) == ("id", "reports-id")
        assert (english.content.language, english.queue) == ("en", ReviewQueue.REPORTS)

    def test_a_policy_naming_a_queue_that_does_not_exist_is_not_published(self, db):
        with pytest.raises(ValidationError, match="there is no queue 'vip'"):
            services.policy_publish(reject_threshold=0.9, review_threshold=0.5,
                                    routing_rules=[{**RULE, "queue": "vip"}])

    def test_the_rules_are_versioned_with_the_policy(self, setup):
        versions = list(ModerationPolicy.objects.order_by("version").values_list("routing_rules", flat=True))
        assert versions[0] == [] and versions[-1] == [RULE]
        services.policy_publish_change(lambda active: {"reject_threshold": 0.95})
        assert services.policy_active().routing_rules == [RULE]  # a later change keeps them

    def test_the_dry_run_counts_the_reviews_a_draft_would_move(self, setup, api_client):
        reported(api_client, "another friendly English sentence that people reported", 2)
        active = services.policy_active()
        none = routing_dry_run(draft=services.policy_draft(active, routing_rules=[]), last=100)
        assert (none.reviews, none.moved) == (3, 1)
        by_queue = {q.slug: (q.now, q.after, q.moved_in, q.moved_out) for q in none.queues}
        assert by_queue["reports-id"] == (1, 0, 0, 1) and by_queue[ReviewQueue.REPORTS] == (2, 3, 1, 0)
        assert none.moves == [("Indonesian reports", "User reports", 1)]
        english = services.policy_draft(active, routing_rules=[{**RULE, "when": {"language": ["en"]}}])
        assert routing_dry_run(draft=english, last=100).moved == 3  # the one back, the two English ones out
        assert routing_dry_run(draft=active, last=100).moved == 0
        assert routing_dry_run(draft=active, last=1).reviews == 1


@pytest.mark.django_db
class TestAccess:
    def test_review_next_offers_the_group_queue_only_to_its_member(self, setup):
        ina, sam, indonesian, english = setup
        assert services.review_take_next(moderator=sam) == english
        assert services.review_take_next(moderator=sam, queue="reports-id") is None
        services.review_release(review_id=english.pk, moderator=sam)
        assert services.review_take_next(moderator=ina, queue="reports-id") == indonesian

    def test_a_moderator_outside_the_group_cannot_decide_it_a_member_and_a_superuser_can(
        self, setup, django_user_model
    ):
        ina, sam, indonesian, _ = setup
        with pytest.raises(QueueForbidden, match="Indonesian reports"):
            services.review_override(review_id=indonesian.pk, label="approved", reason="fine", moderator=sam)
        assert ContentReview.objects.get(pk=indonesian.pk).status == ReviewStatus.MANUAL_REVIEW
        root = django_user_model.objects.create_superuser("root", password="pw-long-enough-1")
        assert services.queues_forbidden(root) == set()
        services.review_override(review_id=indonesian.pk, label="approved", reason="fine", moderator=ina)
        assert ContentReview.objects.get(pk=indonesian.pk).status == ReviewStatus.APPROVED

    def test_the_queues_page_lists_the_group_queue_with_its_depth_to_its_member_only(self, setup):
        ina, sam, indonesian, _ = setup
        member = browser(ina).get(f"{QUEUES}?queue=reports-id").content.decode()
        assert re.search(r'id="queue-reports-id".*?<td class="depth">1</td>', member, re.S)
        assert f"queue-item-{indonesian.short_id}" in member and 'id="review-next-reports-id"' in member
        other = browser(sam).get(f"{QUEUES}?queue=reports-id").content.decode()
        assert "reports-id" not in other and indonesian.short_id not in other
        assert 'id="queue-reports"' in other

    def test_the_review_page_and_the_list_refuse_it_to_another_moderator(self, setup):
        ina, sam, indonesian, english = setup
        assert browser(sam).get(f"{LIST}{indonesian.pk}/timeline/").status_code == 404  # as for no such review
        assert browser(ina).get(f"{LIST}{indonesian.pk}/timeline/").status_code == 200
        listed = browser(sam).get(LIST).content.decode()
        assert english.short_id in listed and indonesian.short_id not in listed
        assert indonesian.short_id in browser(ina).get(LIST).content.decode()

    def test_review_next_on_the_page_refuses_the_group_queue_to_another_moderator(self, setup):
        ina, sam, indonesian, _ = setup
        refused = browser(sam).post(f"{LIST}review-next/", {"queue": "reports-id"}, follow=True)
        assert "only for its groups" in refused.content.decode()
        assert ContentReview.objects.get(pk=indonesian.pk).leased_to is None
        taken = browser(ina).post(f"{LIST}review-next/", {"queue": "reports-id"})
        assert taken.url.startswith(f"{LIST}{indonesian.pk}/timeline/")
        decided = browser(sam).post(f"{LIST}{indonesian.pk}/act/override/",
                                    {"label": "approved", "reason": "fine", "version": indonesian.version}, follow=True)
        assert ContentReview.objects.get(pk=indonesian.pk).status == ReviewStatus.MANUAL_REVIEW
        assert decided.status_code == 404  # as for no such review: its existence is not told

    def test_decide_and_next_stays_in_the_group_queue_and_a_queue_posted_that_does_not_exist_is_ignored(
        self, setup, api_client
    ):
        ina, _, indonesian, english = setup
        second = reported(api_client, f"{INDONESIAN} lagi", 5)
        page = browser(ina)
        page.post(f"{LIST}review-next/", {"queue": "reports-id"})
        nxt = page.post(f"{LIST}{indonesian.pk}/act/override/", {
            "label": "approved", "reason": "fine", "version": indonesian.version, "queue": "reports-id",
            "decide_and_next": "1"})
        assert nxt.url.startswith(f"{LIST}{second.pk}/timeline/")
        bogus = page.post(f"{LIST}{second.pk}/act/override/", {
            "label": "approved", "reason": "fine", "version": ContentReview.objects.get(pk=second.pk).version,
            "queue": "no-such-queue", "decide_and_next": "1"})
        assert bogus.status_code == 302 and bogus.url.startswith(f"{LIST}{english.pk}/timeline/")

    def test_a_review_that_left_the_group_queue_stays_the_groups(self, setup):
        """Decided, it waits nowhere: who may see it is still read from the queue it last waited in."""
        ina, sam, indonesian, english = setup
        services.review_override(review_id=indonesian.pk, label="approved", reason="fine", moderator=ina)
        left = ContentReview.objects.get(pk=indonesian.pk)
        assert (left.queue, left.last_queue) == ("", "reports-id")
        with pytest.raises(QueueForbidden, match="Indonesian reports"):
            services.review_override(review_id=left.pk, label="rejected", category="harassment", reason="no",
                                     moderator=sam)
        with pytest.raises(QueueForbidden):
            services.review_note_add(review_id=left.pk, author=sam, text="a note on a review I may not see")
        assert left.notes.count() == 0
        assert browser(sam).get(f"{LIST}{left.pk}/timeline/").status_code == 404
        assert browser(sam).get(f"{LIST}{left.pk}/history/").status_code == 404
        assert browser(ina).get(f"{LIST}{left.pk}/history/").status_code == 200

    def test_an_undone_decision_goes_back_to_the_group_queue_not_to_its_causes(self, setup, api_client):
        ina = setup[0]
        services.policy_publish_change(lambda active: {"routing_rules": [{**RULE, "when": {"language": ["id"]}}]})
        review, _ = services.review_submit(client=api_client, external_id="unsure-id", kind="text", text=INDONESIAN)
        request = services.review_claim(review_id=review.pk, worker_id="w")
        services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.6), cause="provider_result")
        assert ContentReview.objects.get(pk=review.pk).queue == "reports-id"  # not low_confidence: the rule
        decision = services.review_override(review_id=review.pk, label="approved", reason="fine", moderator=ina)
        # The rule is gone by the time of the undo: routed anew, it would land in its cause's queue.
        services.policy_publish_change(lambda active: {"routing_rules": []})
        services.review_undo(review_id=review.pk, decision_id=decision.pk, moderator=ina)
        back = ContentReview.objects.get(pk=review.pk)
        assert (back.status, back.queue, back.last_queue) == (ReviewStatus.MANUAL_REVIEW, "reports-id", "reports-id")

    def test_metrics_count_every_queue_so_only_staff_who_see_every_queue_read_them(self, setup, settings):
        settings.METRICS_CACHE_S = 0
        ina, sam, _, _ = setup
        assert browser(sam).get("/metrics").status_code == 401
        assert 'moderation_queue_depth{queue="reports-id"} 1.0' in browser(ina).get("/metrics").content.decode()

    def test_queue_counts_stay_index_only_with_custom_queues(self, setup):
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE moderation_contentreview")
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("SET LOCAL enable_bitmapscan = off")  # a table of two rows: a bitmap is as cheap
            cursor.execute("SET LOCAL enable_sort = off")
            # Whether the queue index alone can answer the counts, not which index this two-row
            # table's statistics (left in place by earlier tests' ANALYZE) favour: the
            # all-queues and the due-time indexes are taken out for this transaction (DROP INDEX
            # rolls back with it). At 100k reviews the planner takes this one by itself
            # (bench/workplace.py, "queue page").
            cursor.execute("DROP INDEX review_any_queue_order_idx")
            cursor.execute("DROP INDEX review_queue_due_idx")
            sql, params = workplace.review_queue_counts(timezone.now()).query.sql_with_params()
            cursor.execute("EXPLAIN " + sql, params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        assert "Index Only Scan using review_queue_order_idx" in plan, plan
        figures = {q.queue: q.depth for q in workplace.review_queue_figures()}
        assert figures["reports-id"] == 1 and figures[ReviewQueue.REPORTS] == 1


@pytest.mark.django_db
class TestTheRoutingEditor:
    @pytest.fixture
    def supervisor(self, django_user_model):
        """A supervisor of the group: the dry run reads the reviews they may see."""
        user = django_user_model.objects.create_user("sue", password="pw-long-enough-1", is_staff=True)
        user.groups.add(*Group.objects.filter(name__in=["supervisor", "indonesian"]))
        return browser(user)

    def test_the_dry_run_shows_the_moves_then_publish_makes_the_next_version(self, setup, supervisor):
        active = services.policy_active()
        page = supervisor.post(ROUTING, {"base_version": active.version, "rules": "[]", "dry_last": 100,
                                         "preview": "1"})
        html = page.content.decode()
        assert page.status_code == 200 and "Content-Security-Policy" in page.headers
        assert "<strong>1 of 2</strong> would wait in another queue" in html
        assert "1 from Indonesian reports to User reports" in html
        published = supervisor.post(ROUTING, {"base_version": active.version, "rules": "[]", "dry_last": 100,
                                              "publish": "1"})
        assert published.status_code == 302
        assert services.policy_active().version == active.version + 1 and services.policy_active().routing_rules == []

    def test_the_dry_run_of_a_supervisor_outside_the_group_reads_none_of_its_reviews(self, setup, django_user_model):
        user = django_user_model.objects.create_user("sal", password="pw-long-enough-1", is_staff=True)
        user.groups.add(Group.objects.get(name="supervisor"))
        page = browser(user).post(ROUTING, {"base_version": services.policy_active().version, "rules": "[]",
                                            "dry_last": 100, "preview": "1"}).content.decode()
        assert "<strong>0 of 1</strong> would wait in another queue" in page and "from Indonesian reports" not in page

    @pytest.mark.parametrize(("rules", "error"), [
        ("[{", "not JSON"),
        (json.dumps([{**RULE, "queue": "vip"}]), "there is no queue &#x27;vip&#x27;"),
        (json.dumps([{**RULE, "when": {"language": ["xx"]}}]), "language &#x27;xx&#x27; unknown"),
    ])
    def test_bad_rules_come_back_with_the_error_and_publish_nothing(self, setup, supervisor, rules, error):
        active = services.policy_active()
        page = supervisor.post(ROUTING, {"base_version": active.version, "rules": rules, "dry_last": 10,
                                         "publish": "1"})
        assert page.status_code == 200 and error in page.content.decode()
        assert services.policy_active().version == active.version

    def test_a_moderator_may_not_edit_routing(self, setup):
        assert browser(setup[1]).get(ROUTING).status_code == 403

    def test_the_admin_saves_a_queue_through_its_service_which_records_who_changed_its_groups(
        self, setup, django_user_model
    ):
        root = browser(django_user_model.objects.create_superuser("root", password="pw-long-enough-1"))
        queue = ModerationQueue.objects.get(slug="reports-id")

        changed = root.post(f"/admin/moderation/moderationqueue/{queue.pk}/change/",
                            {"name": " Indonesian ", "description": "", "groups": []})
        added = root.post("/admin/moderation/moderationqueue/add/",
                          {"slug": "vip", "name": "VIP", "description": "", "groups": [Group.objects.get(name="indonesian").pk]})

        assert changed.status_code == added.status_code == 302
        queue.refresh_from_db()
        assert (queue.name, list(queue.groups.all())) == ("Indonesian", [])  # open to every moderator now
        last = queue.history.latest("history_id")
        assert (last.history_user.username, last.history_change_reason) == ("root", "changed name, groups")
        assert list(last.groups.all()) == []
        vip = ModerationQueue.objects.get(slug="vip")
        assert [g.name for g in vip.groups.all()] == ["indonesian"]
        assert {(h.history_user.username, h.history_change_reason) for h in vip.history.all()} == {("root", "created")}

    def test_a_queue_keeps_its_slug_and_no_two_queues_share_one(self, setup):
        queue = ModerationQueue.objects.get(slug="reports-id")
        with pytest.raises(ValidationError, match="never changes"):
            services.review_queue_save(queue_id=queue.pk, slug="reports-en", name="renamed")
        with pytest.raises(ValidationError, match="already exists"):
            services.review_queue_save(queue_id=None, slug="reports-id", name="a second one")
        with pytest.raises(ValidationError, match="slug"):
            services.review_queue_save(queue_id=None, slug="Not A Slug", name="bad")
        assert ModerationQueue.objects.get(pk=queue.pk).name == "Indonesian reports"
        assert ModerationQueue.objects.count() == 1

    def test_a_queue_named_by_the_active_rules_cannot_be_deleted(self, setup, supervisor, django_user_model):
        root = browser(django_user_model.objects.create_superuser("root", password="pw-long-enough-1"))
        queue = ModerationQueue.objects.get(slug="reports-id")
        assert root.post(f"/admin/moderation/moderationqueue/{queue.pk}/delete/", {"post": "yes"}).status_code == 403
        assert ModerationQueue.objects.filter(pk=queue.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_moderators_pressing_review_next_at_once_never_lease_a_queue_they_may_not_take(api_client, django_user_model):
    """Group-only reviews are the most urgent: without the access condition in the locking
    SELECT, the first moderator outside the group to ask would lease one."""
    routed_to_a_group_queue()
    members = [staff(django_user_model, f"ina{i}", "indonesian") for i in range(2)]
    others = [staff(django_user_model, f"sam{i}", "") for i in range(3)]
    moderators = others + members
    restricted = {reported(api_client, f"{INDONESIAN} nomor {i}", i).pk for i in range(4)}
    for i in range(4):
        reported(api_client, f"{ENGLISH} number {i}", 10 + i)
    ContentReview.objects.filter(pk__in=restricted).update(queue_order_at=ContentReview.objects.order_by(
        "queue_order_at").values_list("queue_order_at", flat=True).first())  # ahead of every other review
    for _ in range(3):
        ContentReview.objects.update(leased_to=None, lease_expires_at=None)
        taken = collide(len(moderators), lambda i: services.review_take_next(moderator=moderators[i]))
        got = {m.username: r.pk for m, r in zip(moderators, taken, strict=True) if r is not None}
        assert len(set(got.values())) == len(got)  # never one review to two
        assert not {got[m.username] for m in others if m.username in got} & restricted, got
        assert {got[m.username] for m in members} <= restricted and len(got) == len(moderators)
        held = dict(ContentReview.objects.filter(leased_to__isnull=False).values_list("pk", "leased_to__username"))
        assert all(held[pk].startswith("ina") for pk in restricted if pk in held), held
