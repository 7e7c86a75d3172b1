"""The API speaks JSON, whatever the client says it accepts.

DRF's browsable HTML renderer is not installed (it answered a browser's `Accept: text/html` with
an HTML page, and built forms the timeline view cannot give it: a 500). A request whose Accept
header matches none of a view's renderers is answered with the view's first one instead of a
406: HTTP lets a server ignore Accept (RFC 9110, section 12.5.1), and the contract promises JSON
bodies only (docs/design.md, "Errors"), so no endpoint grows an undocumented status.
"""

from __future__ import annotations

from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation


class JsonWhateverAccept(DefaultContentNegotiation):
    def select_renderer(self, request, renderers, format_suffix=None):
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except NotAcceptable:
            return renderers[0], renderers[0].media_type
