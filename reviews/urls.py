from django.urls import path

from reviews import passkey_views, views

app_name = "reviews"

urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("live", views.inbox_live, name="inbox_live"),
    path("<uuid:review_id>/", views.detail, name="detail"),
    path("<uuid:review_id>/comments", views.comment, name="comment"),
    path("<uuid:review_id>/sign", passkey_views.signing_options, name="sign"),
    path("passkeys/", passkey_views.page, name="passkeys"),
    path("passkeys/options", passkey_views.registration_options, name="passkey-options"),
    path("passkeys/register", passkey_views.register, name="passkey-register"),
    path("passkeys/<int:passkey_id>/remove", passkey_views.remove, name="passkey-remove"),
    path("passkeys/reviewer-keys.json", passkey_views.public_keys, name="reviewer-keys"),
]
