"""Django's makemessages, which also extracts the server's sentences marked with `said("…")` (inference/wire/said.py)
the way it extracts `gettext("…")` (Django's documented way to add xgettext keywords)."""
from django.core.management.commands import makemessages


class Command(makemessages.Command):
    xgettext_options = [*makemessages.Command.xgettext_options, "--keyword=said"]
