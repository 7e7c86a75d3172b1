from django.urls import path

from moderation.api import authors, erasure, views

app_name = "api"

urlpatterns = [
    path("reviews/", views.ReviewListCreateView.as_view(), name="review-list"),
    path("reviews/<uuid:pk>/", views.ReviewDetailView.as_view(), name="review-detail"),
    path("reviews/<uuid:pk>/timeline/", views.ReviewTimelineView.as_view(), name="review-timeline"),
    path("reviews/<uuid:pk>/content", erasure.ReviewContentView.as_view(), name="review-content"),
    path("reviews/<uuid:pk>/content/", erasure.ReviewContentSlashView.as_view()),
    path("reviews/<uuid:pk>/reports/", views.ReviewReportsView.as_view(), name="review-reports"),
    path("reviews/<uuid:pk>/appeals/", views.ReviewAppealsView.as_view(), name="review-appeals"),
    # An author's id may hold slashes: the paths with a suffix come first, and a GET of one is the
    # page of the author whose id ends so (moderation/api/authors.py).
    path("authors/<path:author_id>/appeals/", authors.AuthorAppealsView.as_view(), name="author-appeals"),
    path("authors/<path:author_id>/content", authors.AuthorContentView.as_view(), name="author-content"),
    path("authors/<path:author_id>/content/", authors.AuthorContentSlashView.as_view()),
    path("authors/<path:author_id>/", authors.AuthorDetailView.as_view(), name="author-detail"),
]
