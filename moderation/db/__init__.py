"""Database plumbing below the services: compiled statements, INSERT helpers, the statement cache, transactions."""
