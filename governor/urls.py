from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from django.views.static import serve

from governor import pages_reliability, views
from governor.api import api

urlpatterns = [
    # The site's front door, and the admin's "View site": the review inbox.
    path("", RedirectView.as_view(pattern_name="reviews:inbox"), name="home"),
    path("healthz", views.healthz, name="healthz"),
    # Browsers ask for it on every page whatever the page links: answer, not 404.
    path("favicon.ico", serve, {"path": "favicon.ico", "document_root": settings.STATIC_ROOT},
         name="favicon"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", views.metrics_view, name="metrics"),
    path("api/v1/", api.urls),
    path("admin/", admin.site.urls),
    path("reviews/", include("reviews.urls")),
    path("sessions/<uuid:session_id>/reports", pages_reliability.report_post,
         name="outcome_report"),
    path("sessions/", include("governor.pages")),
    path("projects/", include("governor.pages_reliability")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Vendored htmx, CSS and the admin's assets, collected by `make run`; small and immutable.
    re_path(r"^static/(?P<path>.*)$", serve, {"document_root": settings.STATIC_ROOT}),
]
