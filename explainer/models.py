"""Recorded runs: everything a replay needs (messages, parameters, seed, model spec, every payload)."""
import secrets

from django.db import models


def new_run_id() -> str:
    """128 random bits, URL-safe: the id is the permalink, so it must not be guessable."""
    return secrets.token_urlsafe(16)


class RecordedRun(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=new_run_id, editable=False)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    model_spec = models.CharField(max_length=300)
    messages = models.JSONField()
    params = models.JSONField()
    seed = models.BigIntegerField()
    schema_version = models.PositiveIntegerField(help_text="payload schema version the payloads were recorded in")
    payloads = models.JSONField(help_text="every payload in order: session, prefill, check, step..., done, checks")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.id} ({self.model_spec}, {self.steps} steps)"

    @property
    def steps(self) -> int:
        return sum(1 for p in self.payloads or [] if isinstance(p, dict) and p.get("type") == "step")

    def save(self, *args, **kwargs):
        # Recordings are immutable: a row is written once.
        if not self._state.adding:
            raise ValueError("recorded runs are immutable")
        super().save(*args, **kwargs)
