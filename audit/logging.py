"""Log formatting: one JSON object per line in production, readable lines in development.

The correlation ids bound in audit.context (review_id, idempotency_key, attempt_no, job_id,
request_id, ...) are fields of every record; CorrelationFilter puts them there.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from audit.context import FIELDS


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for field in FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                entry[field] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)
