"""Statements of reasons and the DSA Transparency Database: the reasons a client is told, notices, canned reasons, statements and the transparency report."""
