"""Hash banks end to end: `manage.py hash_banks` (plain files and ThreatExchange exports, bad lines,
idempotent imports, publishing with `through`), the controls that act at once, images decided
through the real pipeline, the dry run, the admin pages, and two removals at once."""

from __future__ import annotations

import threading
import uuid
from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.db import connection

from moderation import services, tasks
from moderation.media.images import hash_words, pdq_hash
from moderation.models import (
    BankChangeKind,
    ContentReview,
    HashBank,
    HashBankChange,
    HashBankEntry,
    ModerationPolicy,
    ReviewStatus,
)
from moderation.transparency.reasons import statement_of_reasons
from moderation.services.hash_banks import DryRunScope, bank_dry_run, bank_entry_remove
from moderation.services.media import bank_index
from tests.helpers import staff_browser
from tests.helpers_media import b64, encoded, flat, image_hash, image_header, picture, resized_recompressed

# ThreatExchange's own example PDQ hashes (python-threatexchange, PdqSignal.get_examples()).
BRIDGE = "f8f8f0cee0f4a84f06370a22038f63f0b36e2ed596621e1d33e6b39c4e9c9b22"
MISC = "e64cc9d91c623882f8d1f1d9a398e78c9f199b3bd83924f2b7e11e0bf861b064"
OCTOCAT = "62c9789627838f69f23cf98c29e37836d61c87c31c59587c4b49a783f496725c"
IMPORT = ("--category", "csam", "--action", "reject")


def run(*args) -> str:
    out = StringIO()
    call_command("hash_banks", *args, stdout=out)
    return out.getvalue()


def bank_file(tmp_path, text: str, name: str = "bank.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def hash_of(data: bytes) -> str:
    return image_hash(data)[0]


def moderated(client, data: bytes) -> ContentReview:
    """An image submitted through the service and decided by the job the queue would run."""
    review, _ = services.review_submit(client=client, external_id=uuid.uuid4().hex, kind="image",
                                       image=(data, image_header(data)))
    tasks.moderate_review(review.pk)
    return ContentReview.objects.select_related("decision", "content__media").get(pk=review.pk)


def bank_reasons(review: ContentReview) -> list[dict]:
    return [r for r in statement_of_reasons(review.decision)["reasons"] if r.get("rule", "").startswith("bank:")]


@pytest.mark.django_db
class TestImport:
    def test_a_plain_file_with_labels_is_imported_as_a_draft_that_no_version_takes(self, tmp_path):
        path = bank_file(tmp_path, f"# known images\n{BRIDGE},bridge, modified\n\n{MISC.upper()}\n")

        out = run("import", path, "--bank", "known", *IMPORT)

        assert "bank known (new): 2 entries added, 0 already in the bank (plain file)" in out
        assert "the next version would take bank known (csam, reject) with all 2 entries (2 new)" in out
        assert "Nothing published" in out and ModerationPolicy.objects.count() == 1
        assert list(HashBankEntry.objects.order_by("id").values_list("pdq", "label")) == [
            (BRIDGE, "bridge, modified"), (MISC, "")]
        change = HashBankChange.objects.get()
        assert change.kind == BankChangeKind.IMPORTED and change.detail["added"] == 2 and change.actor_name

    def test_a_threatexchange_csv_export_takes_its_pdq_rows_and_counts_the_others(self, tmp_path):
        # As `threatexchange dataset -P --csv` writes it (python-threatexchange, cli/dataset_cmd.py).
        path = bank_file(tmp_path, "signal_type,signal_str,collab,category,tags\n"
                                   f"pdq,{BRIDGE},Sample Signals,INVESTIGATION_SEED,bridge mod\n"
                                   "url,https://developers.facebook.com/docs/threat-exchange/,Sample Signals,"
                                   "INVESTIGATION_SEED,\n"
                                   f'pdq,{OCTOCAT},Sample Signals,"POSITIVE_HIT",\n'
                                   "raw_text,\"a, quoted\nline\",Sample Signals,INVESTIGATION_SEED,\n",
                         name="export.csv")

        out = run("import", path, "--bank", "te-sample", *IMPORT)

        assert "2 entries added" in out and "(threatexchange file)" in out
        assert "2 rows of other signal types skipped (raw_text 1, url 1)" in out
        labels = dict(HashBankEntry.objects.values_list("pdq", "label"))
        assert labels == {BRIDGE: "collab: Sample Signals; category: INVESTIGATION_SEED; tags: bridge mod",
                          OCTOCAT: "collab: Sample Signals; category: POSITIVE_HIT"}

    def test_a_graph_api_tsv_export_is_read_by_its_indicator_columns(self, tmp_path):
        path = bank_file(tmp_path, f"indicator_type\tindicator\ttags\nHASH_PDQ\t{MISC}\tmisc\nHASH_MD5\tabc\t\n")
        out = run("import", path, "--bank", "graph", *IMPORT)
        assert "1 entries added" in out and "1 rows of other signal types skipped (HASH_MD5 1)" in out
        assert HashBankEntry.objects.get().label == "tags: misc"

    def test_bad_lines_are_named_by_number_and_nothing_is_written(self, tmp_path):
        path = bank_file(tmp_path, f"{BRIDGE}\n# fine\n{BRIDGE[:-1]}\n{MISC}\nnot-a-hash,label\n")

        with pytest.raises(CommandError) as refused:
            run("import", path, "--bank", "known", *IMPORT, "--publish")

        assert "line 3: not a PDQ hash" in str(refused.value) and "line 5: not a PDQ hash" in str(refused.value)
        assert "line 1" not in str(refused.value) and "Nothing was imported" in str(refused.value)
        assert not HashBank.objects.exists() and not HashBankEntry.objects.exists()
        assert ModerationPolicy.objects.count() == 1

    def test_an_export_row_with_a_bad_hash_is_refused_with_its_line(self, tmp_path):
        path = bank_file(tmp_path, f"signal_type,signal_str\npdq,{BRIDGE}\npdq,xyz\n")
        with pytest.raises(CommandError, match="line 3: not a PDQ hash"):
            run("import", path, "--bank", "known", *IMPORT)
        assert not HashBankEntry.objects.exists()

    def test_an_invalid_category_or_bank_name_is_refused_before_anything_is_written(self, tmp_path):
        path = bank_file(tmp_path, f"{BRIDGE}\n")
        with pytest.raises(CommandError, match="category"):
            run("import", path, "--bank", "known", "--category", "Bad Category", "--action", "reject")
        with pytest.raises(CommandError, match="the name is lower-case letters"):
            run("import", path, "--bank", "Known Bank", *IMPORT)
        assert not HashBank.objects.exists()

    def test_reimporting_the_same_hashes_adds_nothing_and_publishes_nothing(self, tmp_path):
        path = bank_file(tmp_path, f"{BRIDGE}\n{MISC}\n{BRIDGE},again\n")
        first = run("import", path, "--bank", "known", *IMPORT, "--publish")
        assert "2 entries added" in first and "1 hashes were written more than once" in first

        again = run("import", path, "--bank", "known", *IMPORT, "--publish")

        assert "0 entries added, 2 already in the bank" in again and "nothing to publish" in again
        assert HashBankEntry.objects.count() == 2 and ModerationPolicy.objects.count() == 2

    def test_publish_creates_a_version_that_takes_the_bank_through_its_last_entry(self, tmp_path):
        out = run("import", bank_file(tmp_path, f"{BRIDGE}\n{MISC}\n"), "--bank", "known", *IMPORT,
                  "--never-display", "--publish")

        last = HashBankEntry.objects.order_by("-id").first().pk
        assert f"published policy version 2: bank known through entry {last}" in out
        policy = services.policy_active()
        assert policy.hash_banks == [{"name": "known", "category": "csam", "action": "reject",
                                      "never_display": True, "through": last}]
        published = HashBankChange.objects.get(kind=BankChangeKind.PUBLISHED)
        assert published.detail["version"] == 2 and published.detail["through"] == last

    def test_a_version_published_before_an_import_does_not_take_the_new_entries(self, tmp_path):
        run("import", bank_file(tmp_path, f"{BRIDGE}\n"), "--bank", "known", *IMPORT, "--publish")
        v2 = services.policy_active()

        out = run("import", bank_file(tmp_path, f"{MISC}\n{OCTOCAT}\n", name="more.txt"), "--bank", "known", *IMPORT)

        assert "v2 takes 1 of them" in out and "with all 3 entries (2 new)" in out
        v2.refresh_from_db()
        assert v2.hash_banks[0]["through"] == HashBankEntry.objects.get(pdq=BRIDGE).pk
        index = bank_index(v2)
        assert len(index) == 1 and (index.words.T == hash_words([BRIDGE])).all()  # (4, N): column-major
        assert "entries 1 taken / 1 live  enabled  (+2 draft entries)" in run("list")

        run("import", bank_file(tmp_path, f"{MISC}\n", name="again.txt"), "--bank", "known", *IMPORT, "--publish")
        assert len(bank_index(services.policy_active())) == 3 and len(bank_index(v2)) == 1

    def test_republishing_with_another_action_updates_the_banks_entry_in_place(self, tmp_path):
        path = bank_file(tmp_path, f"{BRIDGE}\n")
        run("import", path, "--bank", "known", *IMPORT, "--publish")
        run("import", path, "--bank", "other", *IMPORT, "--publish")
        run("import", path, "--bank", "known", "--category", "csam", "--action", "manual_review", "--publish")
        banks = services.policy_active().hash_banks
        assert [(b["name"], b["action"]) for b in banks] == [("known", "manual_review"), ("other", "reject")]

    def test_list_shows_the_active_versions_banks_and_the_drafts(self, tmp_path):
        run("import", bank_file(tmp_path, f"{BRIDGE}\n{MISC}\n"), "--bank", "known", *IMPORT, "--never-display",
            "--publish")
        run("import", bank_file(tmp_path, f"{OCTOCAT}\n", name="d.txt"), "--bank", "draft-bank", *IMPORT)
        run("remove", "known", MISC, "--reason", "a holiday photo")

        out = run("list")

        assert "v2: pdq_distance 31, image_fallback manual_review" in out
        assert "known  csam  reject  never_display=yes  entries 2 taken / 1 live  enabled" in out
        assert "draft-bank  draft (in no version): 1 entries  enabled" in out
        assert out.index("known") < out.index("draft-bank")

    def test_controls_need_a_reason_and_say_when_nothing_changed(self, tmp_path):
        run("import", bank_file(tmp_path, f"{BRIDGE}\n"), "--bank", "known", *IMPORT)
        with pytest.raises(CommandError, match="reason"):
            run("disable", "known", "--reason", "  ")
        assert "bank known disabled" in run("disable", "known", "--reason", "too many false positives")
        assert "already disabled; nothing changed" in run("disable", "known", "--reason", "again")
        assert "bank known enabled" in run("enable", "known", "--reason", "fixed")
        assert "removed from bank known" in run("remove", "known", BRIDGE.upper(), "--reason", "a false positive")
        assert "already removed; nothing changed" in run("remove", "known", BRIDGE, "--reason", "again")
        with pytest.raises(CommandError, match="has no entry"):
            run("remove", "known", MISC, "--reason", "x")
        with pytest.raises(CommandError, match="no bank 'missing'"):
            run("disable", "missing", "--reason", "x")
        kinds = list(HashBankChange.objects.order_by("id").values_list("kind", flat=True))
        assert kinds == ["imported", "disabled", "enabled", "entry_removed"]
        entry = HashBankEntry.objects.get()
        assert entry.removed_at is not None and entry.removed_reason == "a false positive"


# The job runs as a worker runs it (no transaction of the program's open: invariant 6), in the
# test's transaction (moderation/db/transactions.py), its on-commit work run where it commits.
@pytest.mark.usefixtures("on_commit_callbacks_run")
class TestMatching:
    @pytest.fixture(autouse=True)
    def local(self, settings):
        settings.MODERATION_PROVIDER = "local"

    def bank_of(self, tmp_path, *images: bytes, name: str = "known", publish: bool = True, extra=()) -> str:
        lines = "".join(f"{hash_of(data)},seed image\n" for data in images)
        return run("import", bank_file(tmp_path, lines, name=f"{uuid.uuid4().hex}.txt"), "--bank", name, *IMPORT,
                   *extra, *(["--publish"] if publish else []))

    def test_an_exact_copy_and_a_resized_recompressed_copy_match_and_an_unrelated_image_does_not(self, tmp_path,
                                                                                               api_client):
        original = picture(11)
        self.bank_of(tmp_path, encoded(original))

        exact = moderated(api_client, encoded(original))
        copy = moderated(api_client, resized_recompressed(original))
        unrelated = moderated(api_client, encoded(picture(12)))

        assert exact.status == copy.status == ReviewStatus.REJECTED
        assert bank_reasons(exact) == [{"category": "csam", "score": None, "rule": "bank:known", "distance": 0}]
        (near,) = bank_reasons(copy)
        assert near["rule"] == "bank:known" and 0 < near["distance"] <= 31
        assert f"hash bank known matched at distance {near['distance']}" in copy.decision.explanation
        assert unrelated.status == ReviewStatus.MANUAL_REVIEW and bank_reasons(unrelated) == []
        assert "image_fallback" in unrelated.decision.explanation

    def test_a_flat_image_never_matches_even_a_bank_that_holds_its_hash(self, tmp_path, api_client):
        blank = encoded(flat())
        assert pdq_hash(flat())[1] < 50
        self.bank_of(tmp_path, blank)

        review = moderated(api_client, blank)

        assert review.status == ReviewStatus.MANUAL_REVIEW and bank_reasons(review) == []
        assert "no bank can match it" in review.decision.explanation

    def test_disabling_a_bank_and_removing_an_entry_act_at_once_without_publishing(self, tmp_path, api_client):
        original = encoded(picture(21))
        self.bank_of(tmp_path, original)
        versions = ModerationPolicy.objects.count()

        run("disable", "known", "--reason", "matching holiday photos")
        assert bank_reasons(moderated(api_client, original)) == []
        run("enable", "known", "--reason", "the bank was fine")
        assert bank_reasons(moderated(api_client, original))[0]["rule"] == "bank:known"
        run("remove", "known", hash_of(original), "--reason", "a false positive")
        removed = moderated(api_client, original)

        assert bank_reasons(removed) == [] and removed.status == ReviewStatus.MANUAL_REVIEW
        assert ModerationPolicy.objects.count() == versions

    def test_the_dry_run_lists_the_recent_reviews_a_draft_would_match(self, tmp_path, api_client):
        target, resized = moderated(api_client, encoded(picture(31))), moderated(api_client,
                                                                                 resized_recompressed(picture(31)))
        other = moderated(api_client, encoded(picture(32)))

        out = self.bank_of(tmp_path, encoded(picture(31)), publish=False)

        assert "2 would match" in out and f"review {target.pk}  distance 0" in out
        assert f"review {resized.pk}  distance " in out and str(other.pk) not in out
        assert out.count("now manual_review") == 2
        run("import", bank_file(tmp_path, f"{hash_of(encoded(picture(31)))}\n", name="p.txt"), "--bank", "known",
            *IMPORT, "--publish")
        assert bank_dry_run(name="known").entries == 0  # published: no draft entries left
        whole = bank_dry_run(name="known", scope=DryRunScope.BANK)
        assert [m.review_id for m in whole.matches][:1] == [target.pk] and len(whole.matches) == 2

    def test_the_dry_run_of_a_never_display_bank_prints_ids_and_distances_only(self, tmp_path, api_client):
        data = encoded(picture(41))
        review = moderated(api_client, data)

        out = self.bank_of(tmp_path, data, publish=False, extra=["--never-display"])

        assert f"review {review.pk}  distance 0" in out
        assert b64(data)[:32] not in out and review.content.media.sha256 not in out and "seed image" not in out

    @pytest.mark.django_db(transaction=True)  # a race: threads on connections of their own
    def test_two_removals_at_once_log_once(self, tmp_path):
        run("import", bank_file(tmp_path, f"{BRIDGE}\n"), "--bank", "known", *IMPORT)
        entry = HashBankEntry.objects.get()
        barrier, results, errors = threading.Barrier(2), [], []

        def remove(who: str) -> None:
            try:
                barrier.wait(timeout=10)
                results.append(bank_entry_remove(entry_id=entry.pk, reason=f"false positive ({who})", actor_name=who))
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            finally:
                connection.close()

        threads = [threading.Thread(target=remove, args=(who,)) for who in ("ann", "bob")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert errors == [] and sorted(results) == [False, True]
        assert HashBankChange.objects.filter(kind=BankChangeKind.ENTRY_REMOVED).count() == 1
        entry.refresh_from_db()
        logged = HashBankChange.objects.get(kind=BankChangeKind.ENTRY_REMOVED)
        assert entry.removed_reason == logged.reason and logged.actor_name in entry.removed_reason


@pytest.mark.django_db
class TestAdmin:
    @pytest.fixture
    def bank(self, tmp_path) -> HashBank:
        run("import", bank_file(tmp_path, f"{BRIDGE},bridge\n{MISC}\n"), "--bank", "known", *IMPORT, "--publish")
        return HashBank.objects.get()

    def person(self, django_user_model, name: str, *codenames: str):
        browser = staff_browser(django_user_model, name, None)
        browser.user.user_permissions.add(*Permission.objects.filter(content_type__app_label="moderation",
                                                                     codename__in=codenames))
        return browser

    @pytest.fixture
    def viewer(self, django_user_model):
        return self.person(django_user_model, "vic", "view_hashbank", "view_hashbankentry", "view_hashbankchange")

    @pytest.fixture
    def controller(self, django_user_model):
        return self.person(django_user_model, "cat", "view_hashbank", "view_hashbankentry", "view_hashbankchange",
                           "control_hash_bank")

    def test_the_pages_render_for_a_viewer_without_any_control(self, bank, viewer):
        entry = HashBankEntry.objects.get(pdq=BRIDGE)
        pages = {"/admin/moderation/hashbank/": "v2 through entry",
                 f"/admin/moderation/hashbank/{bank.pk}/change/": "Entries imported",
                 f"/admin/moderation/hashbank/{bank.pk}/dry-run/": "would match",
                 f"/admin/moderation/hashbank/{bank.pk}/dry-run/?scope=bank": "Every entry of the bank",
                 "/admin/moderation/hashbankentry/": BRIDGE,
                 f"/admin/moderation/hashbankentry/{entry.pk}/change/": "bridge",
                 "/admin/moderation/hashbankchange/": "Published in a policy version"}
        for url, shown in pages.items():
            response = viewer.get(url)
            assert response.status_code == 200, url
            html = response.content.decode()
            assert shown in html, url
            assert 'id="disable-form"' not in html and 'id="remove-form"' not in html, url

    def test_the_entry_search_takes_an_exact_hash(self, bank, viewer):
        found = viewer.get("/admin/moderation/hashbankentry/", {"q": f" {MISC.upper()} "}).context["cl"].result_list
        assert [e.pdq for e in found] == [MISC]
        assert list(viewer.get("/admin/moderation/hashbankentry/", {"q": MISC[:20]}).context["cl"].result_list) == []
        removed = viewer.get("/admin/moderation/hashbankentry/", {"removed": "yes"}).context["cl"].result_list
        assert list(removed) == []

    def test_controls_need_the_permission(self, bank, viewer):
        entry = HashBankEntry.objects.get(pdq=BRIDGE)
        assert viewer.post(f"/admin/moderation/hashbank/{bank.pk}/control/disable/",
                           {"reason": "no"}).status_code == 403
        assert viewer.post(f"/admin/moderation/hashbankentry/{entry.pk}/remove/", {"reason": "no"}).status_code == 403
        bank.refresh_from_db()
        entry.refresh_from_db()
        assert bank.enabled and entry.removed_at is None

    def test_a_page_needs_the_view_permission(self, bank, django_user_model):
        nobody = self.person(django_user_model, "nob")
        assert nobody.get(f"/admin/moderation/hashbank/{bank.pk}/change/").status_code == 403
        assert nobody.get(f"/admin/moderation/hashbank/{bank.pk}/dry-run/").status_code == 403
        assert nobody.get("/admin/moderation/hashbankentry/").status_code == 403

    def test_a_controller_disables_the_bank_and_removes_an_entry_with_a_reason(self, bank, controller):
        page = controller.get(f"/admin/moderation/hashbank/{bank.pk}/change/").content.decode()
        assert 'id="disable-form"' in page
        blank = controller.post(f"/admin/moderation/hashbank/{bank.pk}/control/disable/", {"reason": " "},
                                follow=True)
        assert "Not disabled: reason" in blank.content.decode()
        bank.refresh_from_db()
        assert bank.enabled

        controller.post(f"/admin/moderation/hashbank/{bank.pk}/control/disable/", {"reason": "false positives"})
        entry = HashBankEntry.objects.get(pdq=BRIDGE)
        assert 'id="remove-form"' in controller.get(f"/admin/moderation/hashbankentry/{entry.pk}/change/").content.decode()
        controller.post(f"/admin/moderation/hashbankentry/{entry.pk}/remove/", {"reason": "a holiday photo"})

        bank.refresh_from_db()
        entry.refresh_from_db()
        assert not bank.enabled and entry.removed_by == controller.user and entry.removed_reason == "a holiday photo"
        logged = list(HashBankChange.objects.filter(actor=controller.user).order_by("id").values_list("kind", "reason"))
        assert logged == [("disabled", "false positives"), ("entry_removed", "a holiday photo")]
        assert "DISABLED" in controller.get(f"/admin/moderation/hashbank/{bank.pk}/change/").content.decode()

    def test_publishing_a_policy_in_the_admin_keeps_the_banks_and_edits_the_image_fields(self, bank,
                                                                                          django_user_model):
        from tests.moderation.test_admin import WORKPLACE_FIELDS

        supervisor = staff_browser(django_user_model, "sup", "supervisor")
        before = services.policy_active()
        form = supervisor.get("/admin/moderation/moderationpolicy/add/").context["adminform"].form
        assert form.initial["pdq_distance"] == 31 and form.initial["image_fallback"] == "manual_review"

        response = supervisor.post("/admin/moderation/moderationpolicy/add/", {
            "reject_threshold": 0.9, "review_threshold": 0.5, "category_thresholds": "{}",
            "flagged_label": "manual_review", "report_threshold": 3, **WORKPLACE_FIELDS,
            "pdq_distance": 20, "image_fallback": "approved", "based_on": before.version})

        assert response.status_code == 302, response.content.decode()[:2000]
        after = services.policy_active()
        assert after.version == before.version + 1 and after.hash_banks == before.hash_banks
        assert (after.pdq_distance, after.image_fallback) == (20, "approved")
