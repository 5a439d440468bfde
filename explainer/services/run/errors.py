"""What a visitor hears when something fails: engine exceptions mapped to named `error` messages."""
from __future__ import annotations

import logging

import torch

from explainer.protocol import ProtocolError
from inference.engine import SessionError
from inference.kept_steps import NotKept
from inference.ondemand import DetailError
from explainer.messages import error_payload
from inference.prompting import PromptError
from inference.sampling import ParamError
from inference.wire.said import said, told

log = logging.getLogger("explainer.services.run.visitor_run")
ENGINE_ERRORS = (ParamError, PromptError, DetailError, SessionError, NotKept)
OUT_OF_MEMORY = (MemoryError, torch.OutOfMemoryError)


def as_error(exc: Exception) -> dict:
    """Engine exceptions carry a code and a field; everything else is a model error."""
    if isinstance(exc, NotKept):
        return error_payload("not_kept", told(exc), "step")
    if isinstance(exc, ProtocolError):
        return exc.as_message()
    if isinstance(exc, ENGINE_ERRORS):
        return error_payload(getattr(exc, "code", "invalid_value"), told(exc), getattr(exc, "field", None))
    if isinstance(exc, OUT_OF_MEMORY):
        return error_payload("out_of_memory", said("the server ran out of memory for this run; try a shorter prompt or fewer new tokens"))
    return error_payload("model_error", said("the model failed: %(exception)s", exception=exc.__class__.__name__))


def refusal(exc: Exception) -> dict:
    """The `error` for a refused client message; anything but a ProtocolError is logged too."""
    if not isinstance(exc, ProtocolError):
        log.info("refused message: %s", exc)
    return as_error(exc)


def wrapped(exc: Exception) -> ProtocolError:
    """The same error fields as as_error, raised as a ProtocolError; model failures are logged."""
    error = as_error(exc)
    if error["code"] == "model_error":
        log.exception("start failed")
    return ProtocolError(error["code"], error["message"], error["field"])
