"""The ``offline`` model: a deterministic, scripted stand-in for an LLM.

Why it exists: forking, steering, merging and the whole TUI must work (and be testable) on
a machine with no network and no API key. The model reads the latest user prompt (a
steering message appended later counts as the latest) and turns it into tool calls:

=====================  ===============================================================
line                   becomes
=====================  ===============================================================
``!CMD``               ``run_command(command=CMD)``, one call per line, in order
``write PATH``         ``write_file(path=PATH, content=...)`` with the following lines up
                       to a line ``end`` (or the end of the prompt)
``read PATH``          ``read_file(path=PATH)``
``delete PATH``        ``delete_file(path=PATH)``
``ls [PATH]``          ``list_dir(path=PATH or '.')``
``glob PATTERN``       ``glob(pattern=PATTERN)``
``grep REGEX [GLOB]``  ``grep(pattern=REGEX, path_glob=GLOB)``
anything else          plain text, echoed back in the answer
=====================  ===============================================================

A keyword line counts only in exactly that shape (``write a poem`` is text, not a write).
It issues one tool call per model response, so steps run strictly in order and the
history shows each one; when all are done it answers with a short summary of the
results (and echoes the text lines). A prompt with no steps (a plain request such as
``fix the bug in calc.py``) is answered with what the offline model can do and how to get
a real one, in a few lines (:func:`plain_request_reply`); once that help was given in the
history (a fork's branches inherit it), only its first line. The ``echo`` variant answers
``offline model (no LLM) received: <prompt>``. Steps whose tool is not offered in the
request are skipped and said so: it never calls a tool that does not exist.

It is built on :class:`pydantic_ai.models.function.FunctionModel`, so request
preparation, streaming events and token-usage estimates follow pydantic-ai exactly.
Usage is reported (estimated token counts); its price is zero.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from branching_core.errors import InvalidArgumentError

OFFLINE_SYSTEM = "offline"
OFFLINE_PREFIX = "offline"
VARIANTS: dict[str, str] = {
    "scripted": "runs the prompt's script (the default)",
    "echo": "never calls tools; only echoes what it was asked",
    "slow": "scripted, with a pause between streamed words (to watch live streaming)",
}
SLOW_DELAY = 0.05
_WORDS = re.compile(r"\s*\S+\s*|\s+")


@dataclass(frozen=True)
class Step:
    """One tool call the script asks for."""

    tool: str
    args: dict[str, Any]

    def describe(self) -> str:
        """A one-line label for the summary (``run_command `ls```)."""
        if self.tool == "run_command":
            return f"run_command `{self.args['command']}`"
        main = next(iter(self.args.values()), "")
        return f"{self.tool} {main}".rstrip()


@dataclass(frozen=True)
class Script:
    """A parsed prompt: the steps in order and the lines that were just text."""

    steps: tuple[Step, ...] = ()
    text: tuple[str, ...] = ()


def parse_script(prompt: str) -> Script:
    """Turn a prompt into steps and plain text lines (see the module docstring)."""
    steps: list[Step] = []
    text: list[str] = []
    lines = prompt.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        words = stripped.split()
        i += 1
        if stripped.startswith("!") and stripped[1:].strip():
            steps.append(Step("run_command", {"command": stripped[1:].strip()}))
        elif len(words) == 2 and words[0] == "write":
            body: list[str] = []
            while i < len(lines) and lines[i].strip() != "end":
                body.append(lines[i])
                i += 1
            i += 1  # skip the `end` line (or step past the end of the prompt)
            content = "\n".join(body) + ("\n" if body else "")
            steps.append(Step("write_file", {"path": words[1], "content": content}))
        elif len(words) == 2 and words[0] == "read":
            steps.append(Step("read_file", {"path": words[1]}))
        elif len(words) == 2 and words[0] == "delete":
            steps.append(Step("delete_file", {"path": words[1]}))
        elif words[:1] == ["ls"] and len(words) <= 2:
            steps.append(Step("list_dir", {"path": words[1] if len(words) == 2 else "."}))
        elif len(words) == 2 and words[0] == "glob":
            steps.append(Step("glob", {"pattern": words[1]}))
        elif words[:1] == ["grep"] and len(words) in (2, 3):
            args: dict[str, Any] = {"pattern": words[1]}
            if len(words) == 3:
                args["path_glob"] = words[2]
            steps.append(Step("grep", args))
        elif stripped:
            text.append(stripped)
    return Script(tuple(steps), tuple(text))


PLAIN_REPLY_PREFIX = "offline model (no LLM) got"
_QUOTE_LIMIT = 80


def plain_request_reply(prompt: str, messages: list[ModelMessage] | None = None) -> str:
    """The answer to a request that is no script: what works offline and how to get a real
    model (the first words a newcomer reads; an echo told them nothing). Short once said."""
    quoted = " ".join(prompt.split())
    if len(quoted) > _QUOTE_LIMIT:
        quoted = quoted[: _QUOTE_LIMIT - 1] + "…"
    first = f'{PLAIN_REPLY_PREFIX} "{quoted}": it cannot read requests, it runs scripted steps.'
    said = any(
        isinstance(m, ModelResponse)
        and any(
            isinstance(p, TextPart) and p.content.startswith(PLAIN_REPLY_PREFIX) for p in m.parts
        )
        for m in messages or ()
    )
    if said:
        return first
    return "\n".join(
        [
            first,
            "Steps, one per line: `!CMD`, `ls [PATH]`, `read PATH`, `grep REGEX`, "
            "`glob PATTERN`, `write PATH` + lines + `end`.",
            "See a fork of three approaches and a merge: `forkdeck demo`.",
            "A real model: `forkdeck --model anthropic:claude-sonnet-4-5` (with "
            "ANTHROPIC_API_KEY) or `--model openai-compatible:NAME@http://host:port/v1`; "
            "`forkdeck models` checks it.",
        ]
    )


def _prompt_text(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    return "\n".join(item for item in part.content if isinstance(item, str))


def _latest_prompt(messages: list[ModelMessage]) -> tuple[int, str] | None:
    """Index of the latest request carrying user text, and that text."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ModelRequest):
            texts = [_prompt_text(p) for p in message.parts if isinstance(p, UserPromptPart)]
            if texts:
                return index, "\n".join(texts)
    return None


def _first_line(text: str, limit: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(no output)"
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _result_line(part: ToolReturnPart) -> str:
    content = part.model_response_str(wrap_if_error=False)
    if part.outcome == "failed":
        return f"failed: {_first_line(content)}"
    if part.tool_name == "run_command":
        body = content.split("\n", 1)
        status = body[0]
        output = _first_line(body[1]) if len(body) > 1 else ""
        if output.startswith(("stdout:", "stderr:")) and len(body) > 1:
            rest = body[1].split("\n", 1)
            output = _first_line(rest[1]) if len(rest) > 1 else ""
        return f"{status}: {output}" if output and output != "(no output)" else status
    lines = [line for line in content.strip().splitlines() if line.strip()]
    if part.tool_name in ("list_dir", "glob", "grep") and len(lines) > 1:
        # every name, not the first one (a git repository's `ls` said only `.git/`)
        return _first_line(f"{len(lines)} entries: " + ", ".join(s.strip() for s in lines))
    if part.tool_name == "read_file" and len(lines) > 1:
        return _first_line(f"{len(lines)} lines: " + " / ".join(s.strip() for s in lines[:3]))
    return _first_line(content)


def plan_response(
    messages: list[ModelMessage], tool_names: set[str], *, variant: str
) -> ModelResponse:
    """Decide the next response from the history alone, which is what makes it deterministic.

    Public so the coordinator (or a test) can see what the offline model would do next.
    """
    found = _latest_prompt(messages)
    if found is None:
        return ModelResponse(
            parts=[TextPart("offline model (no LLM): there is no user prompt to act on.")]
        )
    index, prompt = found
    script = parse_script(prompt) if variant != "echo" else Script(text=(prompt.strip(),))
    runnable = [s for s in script.steps if s.tool in tool_names]
    skipped = [s for s in script.steps if s.tool not in tool_names]
    later = messages[index + 1 :]
    issued = sum(
        1
        for m in later
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, ToolCallPart)
    )
    if issued < len(runnable):
        step = runnable[issued]
        total_calls = sum(
            1
            for m in messages
            if isinstance(m, ModelResponse)
            for p in m.parts
            if isinstance(p, ToolCallPart)
        )
        call = ToolCallPart(step.tool, dict(step.args), tool_call_id=f"offline-{total_calls + 1}")
        return ModelResponse(parts=[call])
    if not script.steps:
        if variant == "echo":
            echoed = f"offline model (no LLM) received: {prompt.strip()}"
            return ModelResponse(parts=[TextPart(echoed)])
        return ModelResponse(parts=[TextPart(plain_request_reply(prompt, messages[:index]))])
    results = [
        p
        for m in later
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    lines = [f"Done: {len(results)} step{'s' if len(results) != 1 else ''}."]
    for step, result in zip(runnable, results, strict=False):
        lines.append(f"- {step.describe()}: {_result_line(result)}")
    for step in skipped:
        lines.append(f"- {step.describe()}: skipped (no {step.tool} tool here)")
    if script.text:
        lines.append("Also received: " + " / ".join(script.text))
    return ModelResponse(parts=[TextPart("\n".join(lines))])


@dataclass(init=False)
class OfflineModel(FunctionModel):
    """The scripted model; ``OfflineModel('slow')`` picks a variant (see :data:`VARIANTS`)."""

    variant: str = field(default="scripted")
    delay: float = field(default=0.0)

    def __init__(self, variant: str = "scripted", *, delay: float | None = None) -> None:
        if variant not in VARIANTS:
            known = ", ".join(VARIANTS)
            raise InvalidArgumentError(f"unknown offline variant {variant!r}; known: {known}")
        self.variant = variant
        self.delay = (SLOW_DELAY if variant == "slow" else 0.0) if delay is None else delay
        name = OFFLINE_PREFIX if variant == "scripted" else f"{OFFLINE_PREFIX}:{variant}"
        super().__init__(self._respond, stream_function=self._stream, model_name=name)
        self._system = OFFLINE_SYSTEM

    def __eq__(self, other: object) -> bool:
        """Two offline models are interchangeable when variant and pace match."""
        if not isinstance(other, OfflineModel):
            return NotImplemented
        return (self.variant, self.delay) == (other.variant, other.delay)

    def __hash__(self) -> int:
        return hash((OfflineModel, self.variant, self.delay))

    @staticmethod
    def _tool_names(info: AgentInfo) -> set[str]:
        return {tool.name for tool in info.function_tools}

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if self.delay:
            await asyncio.sleep(self.delay)
        return plan_response(messages, self._tool_names(info), variant=self.variant)

    async def _stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        response = plan_response(messages, self._tool_names(info), variant=self.variant)
        part = response.parts[0]
        if isinstance(part, ToolCallPart):
            if self.delay:
                await asyncio.sleep(self.delay)
            yield {
                0: DeltaToolCall(
                    name=part.tool_name,
                    json_args=json.dumps(part.args),
                    tool_call_id=part.tool_call_id,
                )
            }
            return
        assert isinstance(part, TextPart)
        for word in _WORDS.findall(part.content):
            if self.delay:
                await asyncio.sleep(self.delay)
            yield word


def is_offline_name(name: str) -> bool:
    """Whether a model name (``offline`` or ``offline:<variant>``) means the offline model."""
    return name == OFFLINE_PREFIX or name.startswith(OFFLINE_PREFIX + ":")


def offline_model(name: str = OFFLINE_PREFIX) -> OfflineModel:
    """Build the offline model from ``offline`` or ``offline:<variant>``."""
    if not is_offline_name(name):
        raise InvalidArgumentError(f"not an offline model name: {name!r}")
    _, _, variant = name.partition(":")
    return OfflineModel(variant or "scripted")


__all__ = [
    "OFFLINE_SYSTEM",
    "PLAIN_REPLY_PREFIX",
    "VARIANTS",
    "OfflineModel",
    "Script",
    "Step",
    "is_offline_name",
    "offline_model",
    "parse_script",
    "plain_request_reply",
    "plan_response",
]
