"""One row -> token ids and labels, per format. Labels are aligned with the ids (the model shifts
them): the id where the position is trained, IGNORE (-100) where it is not.

Chat masking works for any template by rendering prefixes: for the assistant message i,
render(messages[:i], add_generation_prompt=True) ends where the assistant's text starts and
render(messages[:i+1]) ends where its turn ends, so the characters in between are that turn: its
content and the template's end-of-turn marker. The whole conversation is rendered once and cut at
those offsets, and each piece is tokenized on its own, so the trained ids are exactly the turn's
(a token never straddles a prompt/answer boundary). Whitespace after the end-of-turn marker (ChatML's
newline) is not trained: the model should learn to stop at the marker. When a template rewrites
earlier turns once later ones exist (e.g. drops a previous answer's reasoning), the turn's text is
searched for in the full rendering after the previous turn; a template that changes the answer text
itself cannot be masked and the row is refused with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence

from frenzy.data.errors import InvalidDataError
from frenzy.data.templates import ROLES
from frenzy.data.tokenizer import Tokenizer

IGNORE = -100
Encoded = tuple[list[int], list[int]]  # (ids, labels)


def _where(path: str, row: int) -> str:
    return f"{path}: row {row}"


def encode_text(row: dict, tok: Tokenizer, path: str, number: int) -> list[int]:
    """[BOS] document EOS (BOS when the tokenizer normally adds one); an empty document gives no ids
    (it is counted as dropped)."""
    text = row.get("text")
    if not isinstance(text, str):
        raise InvalidDataError(f"{_where(path, number)}: 'text' must be a string, not {type(text).__name__}; "
                               "put each document's text in a string field 'text'")
    return _bos(tok) + tok.encode(text) + [tok.eos_id] if text else []


def _bos(tok: Tokenizer) -> list[int]:
    return [tok.bos_id] if tok.adds_bos and tok.bos_id is not None else []


def encode_prompt_completion(row: dict, tok: Tokenizer, path: str, number: int) -> Encoded:
    """[BOS] prompt completion EOS, loss on the completion and EOS only."""
    for field in ("prompt", "completion"):
        if not isinstance(row.get(field), str):
            raise InvalidDataError(f"{_where(path, number)}: '{field}' must be a string, not "
                                   f"{type(row.get(field)).__name__}; give every row a text prompt and completion")
    head = _bos(tok) + tok.encode(row["prompt"])
    tail = tok.encode(row["completion"]) + [tok.eos_id]
    return head + tail, [IGNORE] * len(head) + tail


def check_messages(row: dict, path: str, number: int) -> list[dict]:
    """The row's messages as {role, content} dicts; tool turns are refused because templates render
    tool calls and results in incompatible ways that plain {role, content} cannot carry."""
    where = _where(path, number)
    messages = row.get("messages")
    if not isinstance(messages, list) or not messages:
        hint = (" (a CSV cell holds text, not a list: use a JSON lines or Parquet file)"
                if isinstance(messages, str) else "")
        raise InvalidDataError(f"{where}: 'messages' must be a non-empty list of {{role, content}} objects{hint}")
    clean = []
    for index, message in enumerate(messages, start=1):
        if not isinstance(message, dict):
            raise InvalidDataError(f"{where}: message {index} is {type(message).__name__}, "
                                   "not a {role, content} object")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise InvalidDataError(f"{where}: message {index} has role {role!r}; use one of {', '.join(ROLES)} "
                                   "(tool turns are not supported)")
        if not isinstance(content, str):
            raise InvalidDataError(f"{where}: message {index} ({role}) has {type(content).__name__} content; "
                                   "content must be a string")
        clean.append({"role": role, "content": content})
    if not any(m["role"] == "assistant" for m in clean):
        raise InvalidDataError(f"{where}: no assistant message, so nothing would be trained; "
                               "add the assistant's answer")
    return clean


def _render(tok: Tokenizer, messages: Sequence[dict], gen: bool, where: str) -> str:
    try:
        return tok.render_chat(messages, add_generation_prompt=gen)
    except Exception as exc:  # noqa: BLE001 - Jinja templates raise their own errors (raise_exception)
        raise InvalidDataError(f"{where}: the chat template refused these messages ({exc}); "
                               "reorder or merge them as the template expects") from exc


def assistant_spans(messages: list[dict], tok: Tokenizer, where: str) -> tuple[str, list[tuple[int, int]]]:
    """The full rendering and the character spans [start, end) of each assistant turn in it."""
    full = _render(tok, messages, False, where)
    spans, cursor = [], 0
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = _render(tok, messages[:i], True, where)
        turn = _render(tok, messages[:i + 1], False, where)
        if turn.startswith(prompt) and full.startswith(turn) and len(prompt) >= cursor:
            start, end = len(prompt), len(turn)
        else:  # the template rewrites earlier text: find this turn's own text after the previous one
            start, piece = _find_turn(full, prompt, turn, message["content"], cursor)
            if start < 0:
                raise InvalidDataError(f"{where}: the chat template renders assistant message {i + 1} "
                                       "differently inside the whole conversation, so its tokens cannot be "
                                       "found to train on; use a template that keeps earlier turns unchanged")
            end = start + len(piece)
        stop = len(full[start:end].rstrip())
        spans.append((start, start + stop if stop else end))
        cursor = end
    return full, spans


def _find_turn(full: str, prompt: str, turn: str, content: str, cursor: int) -> tuple[int, str]:
    """Where the turn's text (after the generation prompt) is in the full rendering; failing that,
    where its content and end-of-turn marker are (templates such as Qwen3's add an empty reasoning
    block only to the last answer). -1 when neither is there."""
    pieces = [turn[_common_prefix(prompt, turn):]]
    at = turn.rfind(content) if content else -1
    if at >= 0:
        pieces.append(turn[at:])
    for piece in pieces:
        start = full.find(piece, cursor) if piece else -1
        if start >= 0:
            return start, piece
    return -1, ""


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def encode_chat(row: dict, tok: Tokenizer, path: str, number: int) -> Encoded:
    where = _where(path, number)
    full, spans = assistant_spans(check_messages(row, path, number), tok, where)
    ids: list[int] = []
    labels: list[int] = []
    cursor = 0
    for start, end in spans:
        context = tok.encode(full[cursor:start])
        answer = tok.encode(full[start:end])
        ids += context + answer
        labels += [IGNORE] * len(context) + answer
        cursor = end
    rest = tok.encode(full[cursor:])
    return ids + rest, labels + [IGNORE] * len(rest)
