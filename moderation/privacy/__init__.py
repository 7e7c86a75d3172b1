"""Erasure and retention: the one sanctioned redaction of a person's data, and what `prune` deletes. Both reach across the moderation, callbacks and audit records, above the services of both apps."""
