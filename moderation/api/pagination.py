from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination


class NewestFirstPagination(CursorPagination):
    """Cursor pagination: stable under inserts, and an index scan at any depth (no OFFSET)."""

    def decode_cursor(self, request):
        try:
            return super().decode_cursor(request)
        except NotFound:  # DRF's choice; a cursor that is not ours is bad input
            raise ValidationError({"cursor": ["Invalid cursor."]}) from None

    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200

    def get_paginated_response_schema(self, schema):
        """`next` and `previous` are always present (null at either end): say so."""
        paginated = super().get_paginated_response_schema(schema)
        paginated["required"] = ["next", "previous", "results"]
        return paginated
