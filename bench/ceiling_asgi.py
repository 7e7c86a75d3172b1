"""The framework ceiling under the shipped web server: bench.wsgi's bare views (and the project
beside them) inside the very ASGI stack that config.asgi builds for the project, so granian,
its workers and flags (moderation.management.web.web_command) and the stack are the same and
only the view differs. Only bench.shipped starts it; the product never imports bench."""

from __future__ import annotations

import config.asgi  # noqa: F401  (first: it sets a granian worker's signals up, as for the project)
from bench.wsgi import application as ceiling_wsgi
from config.asgi import build

application, watched = build(ceiling_wsgi)
