from __future__ import annotations

import logging

import pytest
from django.db import DatabaseError, connection, transaction

from audit import context
from audit.models import ReviewTransition
from tests.helpers import decided


@pytest.mark.django_db
@pytest.mark.parametrize(
    "statement",
    ["UPDATE audit_reviewtransition SET reason = 'edited'", "DELETE FROM audit_reviewtransition"],
)
def test_the_transition_log_refuses_updates_and_deletes(api_client, statement):
    decided(api_client, "approved")
    rows = list(ReviewTransition.objects.values_list("id", "reason"))

    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement)

    assert list(ReviewTransition.objects.values_list("id", "reason")) == rows


def test_bound_ids_reach_every_log_record_and_unbind_after_the_block(caplog):
    logger = logging.getLogger("tests.audit")
    handler_filter = context.CorrelationFilter()
    caplog.handler.addFilter(handler_filter)
    with caplog.at_level(logging.INFO, logger="tests.audit"):
        with context.bind(review_id="r1", job_id="j1"):
            with context.bind(attempt_no=2):
                logger.info("inner")
            logger.info("outer")
        logger.info("after")
    inner, outer, after = caplog.records
    assert (inner.review_id, inner.job_id, inner.attempt_no) == ("r1", "j1", "2")
    assert not hasattr(outer, "attempt_no") and outer.review_id == "r1"
    assert after.correlation == "" and not hasattr(after, "review_id")


def test_binding_an_unknown_id_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown correlation ids"), context.bind(colour="red"):
        pass
