"""A visitor's run: its state machine, its verbs, on-demand answers, after-run checks, and remote runs on workers."""
