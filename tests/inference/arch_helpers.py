"""Tiny, randomly initialised models of real architectures, wrapped as ``LoadedModel``s.

Nothing is downloaded: each config is built here, the weights come from ``torch.manual_seed(0)``,
and the tokenizer is a WordLevel vocabulary ``<tN> -> N`` (like the bundled stories260K one).
No eos token anywhere, so greedy runs always produce exactly ``max_new_tokens`` tokens.
"""
from __future__ import annotations

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    GemmaConfig,
    GPT2Config,
    LlamaConfig,
    MistralConfig,
    PhiConfig,
    Phi3Config,
    PreTrainedTokenizerFast,
    Qwen2Config,
)

from inference.discovery import adapter_for
from inference.loading import FALLBACK_CHAT_TEMPLATE, LoadedModel, as_served, describe

VOCAB = 128
CONTEXT = 128
SLIDING_WINDOW = 8
NO_SPECIAL_IDS = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None)
_COMMON = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
               vocab_size=VOCAB, max_position_embeddings=CONTEXT, **NO_SPECIAL_IDS)


def arch_config(name: str):
    """A 2-layer, hidden-32 config of the family ``name``."""
    if name == "gpt2":  # learned absolute positions, Conv1D projections, fused qkv
        return GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=CONTEXT, **NO_SPECIAL_IDS)
    if name == "llama":  # grouped-query attention: 2 KV heads for 4 query heads
        return LlamaConfig(**_COMMON, num_key_value_heads=2)
    if name == "qwen2":  # q/k/v biases
        return Qwen2Config(**_COMMON, num_key_value_heads=2)
    if name == "mistral":  # sliding-window attention, window much shorter than prompt + generation
        return MistralConfig(**_COMMON, num_key_value_heads=2, sliding_window=SLIDING_WINDOW)
    if name == "gemma":  # embeddings scaled by sqrt(hidden), multi-query attention, explicit head_dim
        return GemmaConfig(**_COMMON, num_key_value_heads=1, head_dim=8)
    if name == "phi3":  # fused qkv / gate_up projections
        return Phi3Config(**_COMMON, num_key_value_heads=4)
    if name == "phi":  # partial rotary (half of each head), parallel attention + MLP, final_layernorm
        return PhiConfig(**_COMMON)
    raise ValueError(name)


ARCHITECTURES = ("gpt2", "llama", "qwen2", "mistral", "gemma", "phi3", "phi")


def tiny_tokenizer(vocab_size: int = VOCAB) -> PreTrainedTokenizerFast:
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"<t{i}>": i for i in range(3, vocab_size)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>")
    tokenizer.chat_template = FALLBACK_CHAT_TEMPLATE
    return tokenizer


def tiny_loaded(config, spec: str | None = None) -> LoadedModel:
    """A LoadedModel over a freshly initialised (seed 0), eager-attention model of ``config``."""
    config._attn_implementation = "eager"  # attentions are returned only by eager attention
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    model.generation_config.eos_token_id = model.generation_config.pad_token_id = None
    model.generation_config.bos_token_id = None
    as_served(model)  # the linear layers' kernel and the attention, as load_model sets them
    adapter = adapter_for(model)
    description = describe(model, spec or f"tiny-{config.model_type}", adapter, "fallback")
    return LoadedModel(model, tiny_tokenizer(config.vocab_size), description, adapter)


# ---- every decoder-only text architecture in transformers' causal-LM mapping, built small -------------
# Sizes asked of every config that takes them; a config ignores what it does not name.
SMALL = dict(hidden_size=32, n_embd=32, d_model=32, n_embed=32, embed_dim=32, num_hidden_layers=2, n_layer=2,
             num_layers=2, n_layers=2, num_attention_heads=4, n_head=4, n_heads=4, num_heads=4, num_key_value_heads=2,
             intermediate_size=64, ffn_dim=64, n_inner=64, ffn_hidden_size=64, d_ff=64, head_dim=8,
             vocab_size=VOCAB, max_position_embeddings=CONTEXT, n_positions=CONTEXT, n_ctx=CONTEXT, max_seq_len=CONTEXT,
             num_experts=4, num_local_experts=4, n_routed_experts=4, moe_num_experts=4, num_experts_per_tok=2,
             moe_intermediate_size=32, shared_expert_intermediate_size=32, kv_lora_rank=16, q_lora_rank=16,
             qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, qk_head_dim=16, state_size=8, d_state=8,
             mamba_d_state=8, mamba_n_heads=4, mamba_d_head=16, mamba_expand=2, expand=2, time_step_rank=4,
             conv_kernel=4, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
             linear_value_head_dim=8, rotary_dim=4, pad_token_id=0)
MAX_SMALL_PARAMETERS = 6_000_000
# Causal-LM mapping entries that are not decoder-only text models: encoders that can be run as decoders
# (BERT-like, need is_decoder=True), the decoder halves of encoder-decoders, and audio/vision models.
NOT_DECODER_ONLY_TEXT = {
    "bert", "bert-generation", "big_bird", "camembert", "data2vec-text", "electra", "ernie", "megatron-bert",
    "rembert", "roberta", "roberta-prelayernorm", "roc_bert", "roformer", "xlm", "xlm-roberta", "xlm-roberta-xl",
    "xmod", "xlnet", "reformer", "trocr", "whisper", "moshi", "musicgen", "musicgen_melody", "git",
}


def causal_lm_types() -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def decoder_only_text(model_type: str) -> str | None:
    """Why ``model_type`` is not a decoder-only text model, or None when it is."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    if model_type in NOT_DECODER_ONLY_TEXT:
        return "an encoder, an encoder-decoder's decoder, or not text"
    if not MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type].endswith(("ForCausalLM", "LMHeadModel")):
        return f"maps to {MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]} (multimodal)"
    config_class = CONFIG_MAPPING[model_type]
    fields = set(getattr(config_class, "sub_configs", {}) or {})
    if fields & {"vision_config", "audio_config", "vq_config", "audio_encoder_config"}:
        return "multimodal config"
    if getattr(config_class, "is_encoder_decoder", False) is True:
        return "encoder-decoder"
    return None


# Head-shape settings some families derive from each other (multi-head latent attention, rotary dims):
# dropped on a second try so that the family's own defaults keep them consistent.
HEAD_SHAPES = {"head_dim", "rotary_dim", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "qk_head_dim",
               "kv_lora_rank", "q_lora_rank", "mamba_d_head", "mamba_n_heads", "linear_key_head_dim",
               "linear_value_head_dim", "num_key_value_heads"}


def small_config(model_type: str, layers: int = 2, drop: frozenset = frozenset()):
    """The config of ``model_type`` built with the SMALL sizes it accepts, ``layers`` decoder layers."""
    import inspect

    from transformers import CONFIG_MAPPING
    config_class = CONFIG_MAPPING[model_type]
    accepted = set(inspect.signature(config_class.__init__).parameters)
    accepted |= set(getattr(config_class, "__dataclass_fields__", None) or {})
    sizes = {**{k: v for k, v in SMALL.items() if k not in drop}, **{k: layers for k in ("num_hidden_layers", "n_layer", "num_layers", "n_layers")}}
    return config_class(**{k: v for k, v in sizes.items() if k in accepted})


class NotSmall(Exception):
    """transformers cannot build this architecture small here (its own config checks or forward fail)."""


def small_model(model_type: str):
    """A seeded, eager-attention model of ``model_type`` with at most MAX_SMALL_PARAMETERS, in float32, whose
    plain forward runs. Hybrid stacks get 4 or 8 layers when 2 hold no attention layer."""
    failure = None
    for layers, drop in ((2, frozenset()), (4, frozenset()), (8, frozenset()), (2, frozenset(HEAD_SHAPES)),
                         (4, frozenset(HEAD_SHAPES))):
        try:
            config = small_config(model_type, layers, drop)
            config._attn_implementation = "eager"
            with torch.device("meta"):  # sized before any memory is spent: some configs ignore the sizes asked
                parameters = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
            if parameters > MAX_SMALL_PARAMETERS:
                raise NotSmall(f"{parameters:,} parameters at {layers} layers")
            torch.manual_seed(0)
            model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").float().eval()
            with torch.no_grad():
                model(input_ids=torch.tensor([[1, 2, 3]]), use_cache=True)
            break
        except NotSmall:
            raise
        except Exception as exc:  # transformers' own checks: this size does not build
            failure = exc
    else:
        raise NotSmall(f"{type(failure).__name__}: {failure}") from failure
    for name in ("eos_token_id", "pad_token_id", "bos_token_id"):
        setattr(model.generation_config, name, None)
        try:
            setattr(model.config, name, None)  # no token ends a run early: greedy runs have a fixed length
        except Exception:  # strict configs that require an id keep it (it is out of the tiny vocabulary)
            pass
    return model


def small_loaded(model_type: str) -> LoadedModel:
    model = small_model(model_type)
    as_served(model)
    adapter = adapter_for(model)
    description = describe(model, f"tiny-{model_type}", adapter, "fallback")
    text = model.config.get_text_config()
    return LoadedModel(model, tiny_tokenizer(text.vocab_size), description, adapter)


def trace_architecture(model_type: str, prompt: list[int], new: int) -> tuple[str, str]:
    """("exact" | "mismatch" | "crash" | "not_small", detail): the engine's greedy ids against ``generate``,
    every payload validated."""
    from inference.engine import GenerationSession
    from inference.wire.schema import validate_payload
    from inference.prompting import build_prompt
    from inference.sampling import SamplingParams

    try:
        small_model(model_type)
    except NotSmall as exc:
        return "not_small", str(exc)[:160]
    try:
        loaded = small_loaded(model_type)
        with torch.no_grad():
            out = loaded.model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                                        max_new_tokens=new, min_new_tokens=new, do_sample=False, eos_token_id=None,
                                        pad_token_id=0)
        session = GenerationSession(loaded, build_prompt(loaded.tokenizer, input_ids=list(prompt)),
                                    SamplingParams(temperature=0, max_new_tokens=new))
        payloads = [session.session_payload(), session.prefill()]
        while not session.finished:
            payloads.append(session.step())
        for payload in payloads + [session.done_payload()]:
            validate_payload(payload)
    except Exception as exc:  # the point of the sweep: any failure is counted and named
        return "crash", f"{type(exc).__name__}: {str(exc)[:160]}"
    expected = out[0, len(prompt):].tolist()
    return ("exact", "") if session.generated == expected else ("mismatch", f"{session.generated} != {expected}")
