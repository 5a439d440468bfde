"""Where a visitor's run executes: in this process, or on an inference worker when REDIS_URL is set."""
from django.conf import settings

from explainer.services.run.visitor_run import VisitorRun


def open_run(send, channel_name: str, address: str | None = None):
    """A run object with VisitorRun's verbs; `send` is an async callable taking one message dict; `address`
    (the client's) counts its generation slots per address (this process's runs only)."""
    if settings.EXPLAINER_WORKERS:
        from explainer.services.run.remote import RemoteRun

        return RemoteRun(send, channel_name)
    return VisitorRun(send, address)
