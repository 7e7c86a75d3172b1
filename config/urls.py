from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from moderation.observability import health, metrics
from moderation.web.throttles import AddressRateThrottle

public = {"authentication_classes": [], "permission_classes": [], "throttle_classes": [AddressRateThrottle]}

urlpatterns = [
    # The front door is the moderators' workplace; the API lives under /api/v1/ (docs/design.md).
    path("", RedirectView.as_view(url="/admin/", permanent=False), name="root"),
    path("favicon.ico", RedirectView.as_view(url=static("moderation/favicon.svg"), permanent=True), name="favicon"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(**public), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema", **public), name="docs"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("moderation.api.urls")),
    path("api/v1/", include("callbacks.urls")),
]
