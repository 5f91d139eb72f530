from django.urls import path

from reviews import views

app_name = "reviews"

urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("<uuid:review_id>/", views.detail, name="detail"),
]
