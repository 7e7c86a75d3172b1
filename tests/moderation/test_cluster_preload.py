"""A moderation cluster loads the model and the detector before django-q2 forks its workers
(moderation/apps.py); the web server and the notification cluster do not."""

from __future__ import annotations

import pytest

from moderation import apps
from moderation.text import language
from moderation.providers import local


@pytest.mark.parametrize(
    ("argv", "cluster_name", "expected"),
    [
        (["manage.py", "qcluster"], "", True),
        (["manage.py", "qcluster"], "moderation", True),
        (["manage.py", "qcluster"], "moderation-notify", False),
        (["gunicorn", "config.wsgi"], "", False),
        (["manage.py", "migrate"], "", False),
    ],
)
def test_only_a_moderation_cluster_preloads(monkeypatch, settings, argv, cluster_name, expected):
    settings.Q_NAME = "moderation"
    monkeypatch.setenv("Q_CLUSTER_NAME", cluster_name)

    assert apps.starting_moderation_cluster(argv) is expected


def test_the_preload_leaves_the_model_and_the_detector_loaded_in_the_process(monkeypatch, settings):
    settings.MODERATION_PROVIDER = "local"
    monkeypatch.setattr(local, "_model", None)
    monkeypatch.setattr(language, "_detector", None)

    apps.preload_for_workers()

    assert local._model is not None and language._detector is not None
    assert max(local.predictor()(["thanks for the lovely dinner"])[0].values()) < 0.4
