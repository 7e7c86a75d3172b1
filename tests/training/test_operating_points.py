"""`make model` measures each category's operating points on the held-out split
(training/train.py, `operating_points`): precision, recall and the share flagged at each
threshold, worked here by hand on a tiny example."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

from training.train import OPERATING_THRESHOLDS, operating_points  # noqa: E402 - after the skip: training needs scikit-learn

SCORES = np.array([0.9, 0.8, 0.6, 0.4, 0.2, 0.1])
TRUTHS = np.array([1, 0, 1, 1, 1, 0])  # four of the category, two not


def test_precision_recall_and_share_at_each_threshold_by_hand():
    table = operating_points(SCORES, TRUTHS, thresholds=(0.15, 0.5, 0.8, 0.95))

    assert table == [
        # 0.15: five texts at or above, four of them the category: precision 4/5, recall 4/4, share 5/6
        [0.15, 0.8, 1.0, 0.8333],
        # 0.5: 0.9, 0.8, 0.6; two of them the category: precision 2/3, recall 2/4, share 3/6
        [0.5, 0.6667, 0.5, 0.5],
        # 0.8: a score equal to the threshold counts (0.9 and 0.8): precision 1/2, recall 1/4, share 2/6
        [0.8, 0.5, 0.25, 0.3333],
        # 0.95: nothing at or above: no precision, no recall, nothing flagged
        [0.95, None, 0.0, 0.0],
    ]


def test_a_category_without_texts_of_its_own_has_no_recall():
    assert operating_points(np.array([0.7, 0.2]), np.array([0, 0]), thresholds=(0.5,)) == [[0.5, 0.0, None, 0.5]]


def test_the_thresholds_run_from_0_05_to_0_95_in_steps_of_0_05():
    assert OPERATING_THRESHOLDS == (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75,
                                    0.8, 0.85, 0.9, 0.95)
    assert len(operating_points(SCORES, TRUTHS)) == 19
