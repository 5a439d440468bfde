"""URL routes for Hit Enter."""
from django.contrib import admin
from django.urls import path

from explainer import embeds, host, views

urlpatterns = [
    path("", views.index, name="index"),
    path("healthz", views.healthz, name="healthz"),
    path("api/model", views.model_progress, name="model_progress"),
    path("api/runs", views.create_run, name="create_run"),
    path("api/runs/<str:run_id>", views.get_run, name="get_run"),
    path("runs/<str:run_id>", views.replay_page, name="replay"),
    path("embed/", embeds.embed_demo, name="embed_demo"),
    path("embed/<slug:section>/", embeds.embed_section, name="embed_section"),
    path("host/", host.host_page, name="host"),
    path("admin/", admin.site.urls),
]
