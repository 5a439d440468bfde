"""Recorded runs: everything a replay needs (messages, parameters, seed, model spec, every payload)."""
import re
import secrets

from django.db import models

RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")  # what new_run_id makes; anything else is not looked up


def new_run_id() -> str:
    """128 random bits, URL-safe: the id is the permalink, so it must not be guessable. Never with a leading "-"
    (1 id in 64 had one): a spreadsheet reads such a cell as a formula, so the quiz recap's CSV had to write it
    as '-… and the id no longer matched the page's; a command line reads it as an option."""
    while (token := secrets.token_urlsafe(16)).startswith("-"):
        pass
    return token


class RecordedRun(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=new_run_id, editable=False)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    model_spec = models.CharField(max_length=300)
    messages = models.JSONField()
    params = models.JSONField()
    seed = models.BigIntegerField()
    schema_version = models.PositiveIntegerField(help_text="payload schema version the payloads were recorded in")
    payloads = models.JSONField(help_text="every payload in order: session, prefill, check, step..., done, checks")
    size_bytes = models.PositiveBigIntegerField(default=0, help_text="the stored JSON's size (counts toward "
                                                "EXPLAINER_RECORDINGS_MAX_BYTES)")
    signature = models.CharField(max_length=64, blank=True, default="",
                                 help_text="HMAC of the payloads' digest when this server produced them; empty = "
                                           "posted through the API, not verified")

    class Meta:
        ordering = ["-created_at"]

    @classmethod
    def find(cls, run_id: str) -> "RecordedRun | None":
        """The run with this id, or None; malformed ids (e.g. a NUL byte PostgreSQL refuses) are just absent."""
        return cls.objects.filter(pk=run_id).first() if RUN_ID.fullmatch(run_id) else None

    @classmethod
    def exists(cls, run_id: str) -> bool:
        """Whether a run with this id is stored, without reading its row."""
        return RUN_ID.fullmatch(run_id) is not None and cls.objects.filter(pk=run_id).exists()

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


class WorkshopState(models.Model):
    """Workshop mode's shared state (one row, pk=1): what every process must agree on."""

    pins = models.JSONField(default=dict, blank=True, help_text="sampling parameters applied to every run")
    max_new_tokens = models.PositiveIntegerField(null=True, blank=True, help_text="cap on every run; empty = the server's")
    max_sessions = models.PositiveIntegerField(null=True, blank=True, help_text="generating at once; empty = the server's")
    own_runs_allowed = models.BooleanField(default=True, help_text="visitors may start runs of their own")
    broadcast = models.JSONField(default=dict, blank=True, help_text="the host's broadcast: id, messages, params, state")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"workshop state (updated {self.updated_at:%Y-%m-%d %H:%M:%S})"

    @classmethod
    def load(cls) -> "WorkshopState":
        """The one row, created with the defaults on first use."""
        state, _ = cls.objects.get_or_create(pk=1)
        return state


class QuizQuestion(models.Model):
    """A workshop host's "Which token comes next?" at one step of a broadcast (issue 26)."""

    id = models.CharField(primary_key=True, max_length=32, default=new_run_id, editable=False)
    broadcast = models.CharField(max_length=32, db_index=True, help_text="the broadcast's id")
    step = models.PositiveIntegerField(help_text="the step whose token is asked about")
    asked_at = models.DateTimeField(auto_now_add=True)
    revealed_at = models.DateTimeField(null=True, blank=True)
    context = models.JSONField(help_text="{prompt, reply}: the visitor's words and the reply before this token")
    candidates = models.JSONField(help_text="[{key, id, text, special}] in the order shown (shuffled)")
    outcome = models.JSONField(default=dict, blank=True, help_text="at the reveal: model probabilities, the draw")

    class Meta:
        ordering = ["asked_at"]

    def __str__(self) -> str:
        return f"question {self.id} (broadcast {self.broadcast}, step {self.step})"


class QuizAnswer(models.Model):
    """One socket's answer to one question: changed until the reveal, never a second vote."""

    question = models.ForeignKey(QuizQuestion, on_delete=models.CASCADE, related_name="answers")
    socket = models.CharField(max_length=200, help_text="the answering socket's channel (one answer per socket)")
    token_id = models.IntegerField()
    token_text = models.CharField(max_length=200)
    typed = models.CharField(max_length=64, blank=True, default="", help_text="a free-text entry, as typed")
    nickname = models.CharField(max_length=24, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["question", "socket"], name="one_answer_per_socket")]
