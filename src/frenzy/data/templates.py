"""The default chat template, used when the tokenizer has none (the byte tokenizer, or a local
tokenizer without `chat_template`). It is ChatML, the format Qwen, Hermes and many fine-tunes use:

    <|im_start|>{role}\\n{content}<|im_end|>\\n        (one block per message, in order)
    <|im_start|>assistant\\n                            (only with add_generation_prompt=True)

No system message is invented and no BOS is written. With the byte tokenizer the markers are plain
UTF-8 bytes (the model learns them like any text); with a tokenizer that has <|im_start|> and
<|im_end|> as special tokens they become single ids. The same template as Jinja, for a tokenizer
config, is DEFAULT_CHAT_TEMPLATE.
"""

from __future__ import annotations

from collections.abc import Sequence

START, END = "<|im_start|>", "<|im_end|>"
ROLES = ("system", "user", "assistant")

DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def render_default(messages: Sequence[dict], add_generation_prompt: bool) -> str:
    text = "".join(f"{START}{m['role']}\n{m['content']}{END}\n" for m in messages)
    return text + (f"{START}assistant\n" if add_generation_prompt else "")
