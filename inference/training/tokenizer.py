"""Train the bundled model's byte-level BPE tokenizer and give it a chat template."""
from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

ROLE_TOKENS = {"system": "<|system|>", "user": "<|user|>", "assistant": "<|assistant|>"}
END_TOKEN, PAD_TOKEN = "<|end|>", "<|pad|>"
SPECIAL_TOKENS = [PAD_TOKEN, END_TOKEN, *ROLE_TOKENS.values()]

# Each message is "<|role|>\n{content}<|end|>"; the generation prompt "<|assistant|>\n" opens the
# assistant turn exactly as it starts in training.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] not in ['system', 'user', 'assistant'] -%}"
    "{{ raise_exception('role must be system, user or assistant, not ' ~ message['role']) }}"
    "{%- endif -%}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>"
    "{%- endfor -%}"
    "{%- if add_generation_prompt %}<|assistant|>\n{% endif -%}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 4096) -> PreTrainedTokenizerFast:
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token=END_TOKEN, pad_token=PAD_TOKEN,
        additional_special_tokens=list(ROLE_TOKENS.values()),
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.model_max_length = 512
    return tokenizer
