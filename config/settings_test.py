"""The test suite's settings: config/settings.py, with a password hasher that costs nothing.

pytest selects it (pytest.ini), and the processes the tests start (the platform, the cluster, a
live server's clients) inherit DJANGO_SETTINGS_MODULE from it, so a user a test creates signs in
to them. PBKDF2 at its full cost took a tenth of a second per user created or signed in; MD5
comes first here, and PBKDF2 is still accepted (a hash a production settings module wrote checks).
Nothing else differs: the tests run the product's settings.
"""

from config.settings import *  # noqa: F403

PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]
