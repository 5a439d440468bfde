"""App config for the explainer."""
from django.apps import AppConfig


class ExplainerConfig(AppConfig):
    name = "explainer"
    verbose_name = "Hit Enter"
