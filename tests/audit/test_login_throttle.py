"""Sign-in to the admin is throttled by account and by address, each on its own, counted in
PostgreSQL (audit/login_throttle.py; docs/operations.md, "Sign-in throttling"): once locked, a
sign-in gets a page saying so (429), the right password included, until the cool-off has
passed; every failure is a row staff read and a log line with the request's id."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt, AccessFailureLog
from django.conf import settings
from django.test import Client

from audit.context import CorrelationFilter

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/"
PASSWORD = "pw-long-enough-1"
LOCKED = "Sign-in is locked: too many failed attempts for this account or from this address."


@pytest.fixture(autouse=True)
def quick_hashes(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # dozens of sign-ins a test


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_user("admin", password=PASSWORD, is_staff=True, is_superuser=True)


def sign_in(username: str, password: str, address: str = "203.0.113.7", **headers):
    """One POST of the admin's login form from `address`; returns (response, signed in?)."""
    browser = Client()
    response = browser.post(LOGIN, {"username": username, "password": password, "next": "/admin/"},
                            REMOTE_ADDR=address, **headers)
    return response, "_auth_user_id" in browser.session


def test_forty_wrong_passwords_lock_the_account_and_then_the_right_one_is_refused(admin_user):
    statuses = [sign_in("admin", f"guess-{n}")[0].status_code for n in range(40)]

    limit = settings.LOGIN_FAILURE_LIMIT
    assert statuses == [200] * (limit - 1) + [429] * (40 - limit + 1)
    response, signed_in = sign_in("admin", PASSWORD)
    assert response.status_code == 429 and not signed_in
    assert LOCKED in response.content.decode() and f"Try again in {settings.LOGIN_COOLOFF_MIN:g} minutes" in response.content.decode()


def test_one_address_guessing_at_many_accounts_is_locked_for_every_account(admin_user):
    for n in range(settings.LOGIN_FAILURE_LIMIT):
        sign_in(f"user-{n}", "guess")

    assert sign_in("admin", PASSWORD)[0].status_code == 429
    assert sign_in("admin", PASSWORD, address="198.51.100.1")[1]  # from elsewhere, the account is fine


def test_one_account_guessed_at_from_many_addresses_is_locked_from_every_address(admin_user):
    for n in range(settings.LOGIN_FAILURE_LIMIT):
        sign_in("admin", "guess", address=f"198.51.100.{n}")

    response, signed_in = sign_in("admin", PASSWORD, address="192.0.2.1")
    assert response.status_code == 429 and not signed_in


def test_a_forwarded_for_header_does_not_make_each_guess_another_address(admin_user):
    for n in range(settings.LOGIN_FAILURE_LIMIT):
        sign_in(f"user-{n}", "guess", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}")

    assert sign_in("admin", PASSWORD, HTTP_X_FORWARDED_FOR="192.0.2.1")[0].status_code == 429


def test_behind_a_proxy_each_client_is_counted_by_the_address_the_proxy_saw(admin_user, settings):
    # One proxy in front (NUM_PROXIES, as the API's rate limits read it): REMOTE_ADDR is the proxy's
    # for everyone, and counting by it would lock every client out for one client's guesses.
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    # The addresses are the test client's REMOTE_ADDR and header values (documentation ranges): nothing connects.
    for n in range(settings.LOGIN_FAILURE_LIMIT):
        sign_in(f"user-{n}", "guess", address="203.0.113.10", HTTP_X_FORWARDED_FOR="198.51.100.9")

    assert sign_in("nobody", "guess", address="203.0.113.10", HTTP_X_FORWARDED_FOR="198.51.100.9")[0].status_code == 429
    response, signed_in = sign_in("admin", PASSWORD, address="203.0.113.10", HTTP_X_FORWARDED_FOR="192.0.2.1")
    assert response.status_code == 302 and signed_in


def test_the_lock_lifts_once_the_cool_off_has_passed_since_the_last_failure(admin_user):
    for _ in range(settings.LOGIN_FAILURE_LIMIT):
        sign_in("admin", "guess")
    assert sign_in("admin", PASSWORD)[0].status_code == 429

    # The cool-off passing: every failure counted was that long ago.
    AccessAttempt.objects.update(attempt_time=AccessAttempt.objects.get().attempt_time
                                 - timedelta(minutes=settings.LOGIN_COOLOFF_MIN, seconds=1))

    response, signed_in = sign_in("admin", PASSWORD)
    assert response.status_code == 302 and signed_in


def test_a_sign_in_forgets_that_accounts_failures_from_that_address_and_no_others(admin_user, django_user_model):
    django_user_model.objects.create_user("alice", password=PASSWORD, is_staff=True)
    for _ in range(3):
        sign_in("alice", "typo")
    for n in range(settings.LOGIN_FAILURE_LIMIT - 4):
        sign_in("admin", f"guess-{n}")

    assert sign_in("alice", PASSWORD)[1]

    assert not AccessAttempt.objects.filter(username="alice").exists()
    assert AccessAttempt.objects.get(username="admin").failures_since_start == settings.LOGIN_FAILURE_LIMIT - 4
    # The address's guesses at admin still count: a sign-in to one account does not wipe them.
    for n in range(4):
        sign_in("admin", f"more-{n}")
    assert sign_in("admin", PASSWORD)[0].status_code == 429


def test_every_failure_is_a_row_staff_read_and_a_log_line_with_the_request_id(admin_user, caplog):
    caplog.handler.addFilter(CorrelationFilter())
    for n in range(settings.LOGIN_FAILURE_LIMIT + 2):
        sign_in("admin", f"guess-{n}", HTTP_X_REQUEST_ID=f"login-{n}")

    rows = AccessFailureLog.objects.filter(username="admin", ip_address="203.0.113.7")
    assert rows.count() == settings.LOGIN_FAILURE_LIMIT + 2
    assert rows.filter(locked_out=True).count() == 3
    locking = [r for r in caplog.records if r.name.startswith("axes") and "Locking out" in r.getMessage()]
    assert [r.request_id for r in locking] == [f"login-{n}" for n in range(settings.LOGIN_FAILURE_LIMIT - 1,
                                                                          settings.LOGIN_FAILURE_LIMIT + 2)]
    staff = Client()
    staff.force_login(admin_user)
    page = staff.get("/admin/axes/accessfailurelog/").content.decode()
    assert "203.0.113.7" in page and "admin" in page
