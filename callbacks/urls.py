from django.urls import path

from callbacks.views import ProviderCallbackView

urlpatterns = [
    path("callbacks/<slug:provider>/", ProviderCallbackView.as_view(), name="provider-callback"),
]
