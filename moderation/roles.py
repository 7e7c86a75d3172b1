"""The roles of the moderator's workplace, as Django groups.

moderator: sees everything a decision needs, overrides and escalates (a decided review too: a
second look), acts on authors (warns, suspends, bans, lifts, resolves account appeals) and mutes
or unmutes reporters, and reads their own QA figures. team_lead: a moderator who also marks
golden items, settles the second reviews' disagreements, reads every moderator's QA figures
(docs/qa.md) and, as a senior moderator, settles second looks at decided reviews (a supervisor
too). supervisor: also
reprocesses, publishes policy versions (routing rules included), manages the review queues and re-queues statements of reasons the Transparency
Database refused, disables hash banks and removes their entries. auditor: sees everything but the
images' bytes, changes nothing, and reads every moderator's QA figures. legal: sees what an
auditor sees, and alone places, extends and lifts legal holds, opens preservation snapshots (each
opening logged) and keeps the register of law-enforcement requests (docs/legal-holds.md).
Every role reads the statements (the admin links
each to its review or author) and the transparency report.
"""

from __future__ import annotations

from django.apps import apps
from django.contrib.auth.management import create_permissions
from django.contrib.auth.models import Group, Permission

VIEW_ALL = [
    "moderation.view_contentreview",
    "moderation.view_content",
    "moderation.view_decision",
    "moderation.view_moderationrequest",
    "moderation.view_providerattempt",
    "moderation.view_moderationpolicy",
    "moderation.view_providercircuit",
    "moderation.view_report",
    "moderation.view_appeal",
    "moderation.view_accountappeal",  # the account appeals' queue and pages (docs/workplace.md, "Account appeals")
    "audit.view_reviewtransition",
    "audit.view_pipelineevent",
    "callbacks.view_providercallback",
    "moderation.view_contenterasure",  # erasure tombstones: who erased a content, when and why
    "moderation.view_author",  # the author page: its reviews, strikes, actions, appeals
    "moderation.view_reporter",  # the reporters: accuracy, weight, muting and its history
    "moderation.view_transparencystatement",  # statements of reasons, and the transparency report page
    # Hash banks, their entries and their log (docs/images.md); an image's hash and state, not its bytes.
    "moderation.view_reviewmedia",
    "moderation.view_hashbank",
    "moderation.view_hashbankentry",
    "moderation.view_hashbankchange",
    "moderation.view_moderationqueue",  # the review queues and who may work each (docs/workplace.md)
    # Backtests and shadow runs of policy versions (docs/quality.md): figures, and changed or
    # disagreeing reviews only where the viewer may open them.
    "moderation.view_backtest",
    "moderation.view_shadowrun",
]
# Who may override a review may act on its author, and mute or unmute a reporter.
# Who decides sees the images and hears the audio they decide on (blurred and grey until asked:
# docs/workplace.md); an auditor reads the decisions, not the pictures.
# The QA page (docs/qa.md): a moderator reads their own figures; who also holds view_all_qa reads
# everyone's; lead_qa marks golden items and settles disagreements.
MODERATOR = [*VIEW_ALL, "moderation.override_review", "moderation.escalate_review", "moderation.act_on_author",
             "moderation.mute_reporter", "moderation.view_media_bytes", "moderation.view_qaitem"]
QA_LEAD = ["moderation.view_all_qa", "moderation.lead_qa"]
# A senior moderator settles second looks at decided reviews: confirms the decision, or changes it
# through the override path (docs/workplace.md, "A second look at a decided review").
SENIOR = ["moderation.settle_second_look"]
ROLES = {
    "moderator": MODERATOR,
    # A team lead moderates, and keeps the moderators' work measured: golden items, the second
    # reviews' disagreements, everyone's QA figures.
    "team_lead": [*MODERATOR, *QA_LEAD, *SENIOR],
    # A statement the Transparency Database refused is re-queued, once the mapping is fixed, by a
    # supervisor (moderation/admin/statements.py).
    "supervisor": [*MODERATOR, "moderation.reprocess_review", "moderation.add_moderationpolicy",
                   "moderation.requeue_statement", "moderation.control_hash_bank",
                   # Custom review queues and their groups; routing rules are policy (add_moderationpolicy).
                   "moderation.add_moderationqueue", "moderation.change_moderationqueue", *QA_LEAD, *SENIOR],
    "auditor": [*VIEW_ALL, "moderation.view_qaitem", "moderation.view_all_qa"],
    # Legal holds and evidence (docs/legal-holds.md): no other role sees or changes them.
    "legal": [*VIEW_ALL, "moderation.view_legalhold", "moderation.place_legal_hold",
              "moderation.view_preservationsnapshot", "moderation.view_snapshot_content",
              "moderation.view_authorityreport", "moderation.view_lawenforcementrequest",
              "moderation.register_request"],
}


def ensure_roles() -> dict[str, int]:
    """Create or update the groups so each has exactly its role's permissions. Idempotent."""
    for app_config in apps.get_app_configs():  # permissions exist before the groups refer to them
        create_permissions(app_config, verbosity=0)
    permissions = _permissions({code for codenames in ROLES.values() for code in codenames})
    counts = {}
    for name, codenames in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        wanted = [permissions[code] for code in codenames]
        group.permissions.set(wanted)
        counts[name] = len(wanted)
    return counts


def _permissions(dotted: set[str]) -> dict[str, Permission]:
    """The permissions named "app_label.codename", read in one query; one that does not exist is
    an error in ROLES."""
    found = {
        f"{permission.content_type.app_label}.{permission.codename}": permission
        for permission in Permission.objects.select_related("content_type").filter(
            codename__in={code.split(".", 1)[1] for code in dotted})
    }
    if missing := sorted(dotted - found.keys()):
        raise Permission.DoesNotExist(f"ROLES names permissions that do not exist: {', '.join(missing)}")
    return found
