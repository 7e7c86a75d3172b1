"""How good the judging is, on live work (docs/quality.md): backtests of a policy version over
what moderators decided (`backtests.py`, judging with `replay.py`), and shadow runs beside the
active version (`shadows.py`).

A layer of its own, above the read side it measures with (`evaluate_policy`'s figures:
moderation/observability/evaluation.py) and below the entry points that start it. It writes its
own records only (moderation/models/quality.py): never a review, a decision, a notification or a
statement.
"""
