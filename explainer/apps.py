"""App config for the explainer."""
import sys

from django.apps import AppConfig


class ExplainerConfig(AppConfig):
    name = "explainer"
    verbose_name = "Hit Enter"

    def ready(self):
        # An inference worker (`manage.py runworker inference-N`) loads its model before it listens, so it
        # answers no ping while loading: sockets never pick it early or mistake a long load for a death.
        if sys.argv[1:2] == ["runworker"]:
            from explainer.services.device import model_registry

            model_registry.load_for_worker()
