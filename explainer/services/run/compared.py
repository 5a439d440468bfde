"""Compare mode (issue 29, docs/protocol.md "Two runs side by side"): run B beside the visitor's run A.

A `start` with `compare` opens a second GenerationSession on the same prompt: other sampling parameters, the
int8 copy of the served weights, or one of EXPLAINER_COMPARE_MODELS. It is stepped with run A, one step each per
tick of the shared scheduler (batched with every visitor's steps), so the slower pass paces both. Every message
of run B carries `run: "b"`; after each pair of steps a `compare` message says what parts them. VisitorRun owns
the pair (one driver, one control state, two generation slots); this module builds and describes run B.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from explainer.protocol import ProtocolError
from explainer.services.device import model_registry
from explainer.services.device.executors import run_on
from inference.compare import StepComparison, compare_step, same_vocabulary
from inference.engine import GenerationSession
from inference.loading import LoadedModel, ModelNotAvailable
from inference.sampling import SamplingParams
from inference.wire.builders import compare_payload
from inference.wire.said import said, told

RUNS = ("a", "b", "both")  # which run a fork (or a detail, retemper: a or b) is for
WEIGHTS = ("float", "int8")


@dataclass(frozen=True)
class CompareAsk:
    """What a start's `compare` asked for run B: parameter overrides, the int8 weights, or another model."""

    overrides: dict = field(default_factory=dict)
    weights: str = "float"
    model: str | None = None

    def describe(self, params: SamplingParams, spec: str) -> dict:
        """The `compare` object of B's session: its weights, its model and the parameters it changed."""
        return {"weights": self.weights, "model": spec, "changed": {k: getattr(params, k) for k in self.overrides}}


def asked(message: dict) -> CompareAsk | None:
    """The start's `compare` checked (None: a lone run); each refusal names the field."""
    ask = message.get("compare")
    if ask is None:
        return None
    if not isinstance(ask, dict):
        raise ProtocolError("wrong_type", said("compare must be an object"), "compare")
    unknown = sorted(set(ask) - {"params", "weights", "model"})
    if unknown:
        raise ProtocolError("invalid_value", said("compare takes params, weights and model, not %(fields)s",
                                                  fields=", ".join(unknown)), "compare")
    overrides = ask.get("params") or {}
    if not isinstance(overrides, dict):
        raise ProtocolError("wrong_type", said("compare.params must be an object"), "compare.params")
    weights, model = ask.get("weights") or "float", ask.get("model")
    if weights not in WEIGHTS:
        raise ProtocolError("invalid_value", said("compare.weights must be float or int8"), "compare.weights")
    if model is not None and (not isinstance(model, str) or weights != "float"):
        raise ProtocolError("invalid_value", said("compare.model must be a model name, without compare.weights"),
                            "compare.model")
    if not overrides and weights == "float" and model is None:
        raise ProtocolError("invalid_value", said("compare must change something: params, weights or model"), "compare")
    return CompareAsk(dict(overrides), weights, model)


def b_params(ask: CompareAsk, a: SamplingParams, max_new_tokens_cap: int) -> SamplingParams:
    """Run A's parameters (its seed too, so the same dice roll where nothing else changed) with B's overrides."""
    return SamplingParams.from_dict({**a.to_dict(), **ask.overrides}, max_new_tokens_cap=max_new_tokens_cap)


async def b_model(ask: CompareAsk) -> LoadedModel:
    """The weights run B reads: the served model, its int8 copy (built once), or a listed compare model."""
    try:
        if ask.model is not None:
            return await run_on("loader", model_registry.get_compare_model, ask.model)
        if ask.weights == "int8":
            return await run_on("loader", model_registry.get_int8)
        return await run_on("loader", model_registry.get_model)
    except ModelNotAvailable as exc:
        raise ProtocolError("model_error", told(exc), "compare.model") from None


def two_slots_refusal(refused: str) -> str:
    """The `busy` reason of a compare start without a second generation slot."""
    return said("comparing runs two generations at once and needs two of your generation slots; only one is free "
                "now (%(refused)s)", refused=refused)


def as_b(message: dict) -> dict:
    """One of run B's messages: the same payload, marked as B's."""
    return {**message, "run": "b"}


class RunB:
    """Run B's session beside run A's, and what the pair has said so far."""

    def __init__(self, session: GenerationSession, ask: CompareAsk, same_tokenizer: bool):
        self.session, self.ask, self.same_tokenizer = session, ask, same_tokenizer
        self.first_parting: int | None = None
        self.holds_slot = False

    @classmethod
    def open(cls, loaded: LoadedModel, loaded_a: LoadedModel, prompt_a, params: SamplingParams, ask: CompareAsk,
             prompt_for) -> "RunB":
        """On the loader thread: B's session on its own model's reading of the prompt (`prompt_for(tokenizer)`)."""
        prompt = prompt_a if loaded.tokenizer is loaded_a.tokenizer else prompt_for(loaded.tokenizer)
        return cls(GenerationSession(loaded, prompt, params), ask, same_vocabulary(loaded_a, loaded))

    def session_message(self) -> dict:
        payload = self.session.session_payload()
        return as_b({**payload, "compare": self.ask.describe(self.session.params, self.session.description.spec)})

    def compared(self, a: GenerationSession) -> dict | None:
        """The `compare` message of the step both runs have just taken; None unless they stand at the same step."""
        b = self.session
        if a.step_index != b.step_index or not a.step_index or a.last_draw is None or b.last_draw is None:
            return None
        comparison: StepComparison = compare_step(a, b, a.step_index, self.same_tokenizer)
        if comparison.parted and (self.first_parting is None or comparison.step < self.first_parting):
            self.first_parting = comparison.step
        return compare_payload(comparison, self.first_parting)

    def rewound_to(self, step: int) -> None:
        """A fork at `step`: a parting at or after it is no longer part of the pair's story."""
        if self.first_parting is not None and self.first_parting >= step:
            self.first_parting = None
