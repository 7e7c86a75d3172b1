from rest_framework.pagination import CursorPagination


class NewestFirstPagination(CursorPagination):
    """Cursor pagination: stable under inserts, and an index scan at any depth (no OFFSET)."""

    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
