"""URL routes for Hit Enter."""
from django.contrib import admin
from django.conf import settings
from django.urls import path
from django.views.generic import RedirectView
from django.views.i18n import JavaScriptCatalog, JSONCatalog

from explainer import embeds, host, quiz_recap, views
from explainer.admin import guarded_login

urlpatterns = [
    path("", views.index, name="index"),
    # Browsers ask for /favicon.ico on pages without an icon link (a 404 is a console error).
    path("favicon.ico", RedirectView.as_view(url=settings.STATIC_URL + "favicon.svg", permanent=True), name="favicon"),
    path("healthz", views.healthz, name="healthz"),
    # The words static/js builds, in the page's language (static/js/lib/i18n.js reads window.django).
    path("jsi18n/", JavaScriptCatalog.as_view(), name="javascript-catalog"),
    # The same words as JSON, for a diagram's lang= on another site's page (lib/i18n.js loadCatalog; CORS-shared).
    path("jsi18n.json", JSONCatalog.as_view(), name="json-catalog"),
    path("api/model", views.model_progress, name="model_progress"),
    path("api/runs", views.create_run, name="create_run"),
    path("api/runs/<str:run_id>", views.get_run, name="get_run"),
    path("api/runs/<str:run_id>/<slug:section>", views.get_run_section, name="get_run_section"),
    path("api/examples/<slug:example>/<slug:section>", views.get_example_section, name="get_example_section"),
    path("runs/<str:run_id>", views.replay_page, name="replay"),
    path("embed/", embeds.embed_demo, name="embed_demo"),
    path("embed/<slug:section>/", embeds.embed_section, name="embed_section"),
    path("embed/<slug:section>/static/", embeds.embed_static, name="embed_static"),
    path("host/", host.host_page, name="host"),
    path("host/present/", host.present_page, name="host_present"),
    path("host/quiz/", quiz_recap.recap_page, name="quiz_recap"),
    path("host/quiz.csv", quiz_recap.recap_csv, name="quiz_recap_csv"),
    path("host/quiz.json", quiz_recap.recap_json, name="quiz_recap_json"),
    path("admin/login/", guarded_login, name="admin_login"),  # before the admin's own: the lockout
    path("admin/", admin.site.urls),
]
