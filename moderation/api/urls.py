from django.urls import path

from moderation.api import erasure, views

app_name = "api"

urlpatterns = [
    path("reviews/", views.ReviewListCreateView.as_view(), name="review-list"),
    path("reviews/<uuid:pk>/", views.ReviewDetailView.as_view(), name="review-detail"),
    path("reviews/<uuid:pk>/timeline/", views.ReviewTimelineView.as_view(), name="review-timeline"),
    path("reviews/<uuid:pk>/content", erasure.ReviewContentView.as_view(), name="review-content"),
    path("reviews/<uuid:pk>/content/", erasure.ReviewContentSlashView.as_view()),
    path("reviews/<uuid:pk>/reports/", views.ReviewReportsView.as_view(), name="review-reports"),
    path("reviews/<uuid:pk>/appeals/", views.ReviewAppealsView.as_view(), name="review-appeals"),
]
