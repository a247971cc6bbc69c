"""Scorers where a model acts as judge: `model_graded_qa` and `model_graded_fact`.

The judge sees a template filled with the sample's input, the solver's
answer and the target (as the criterion), replies with its reasoning, and
ends with `GRADE: <letter>`. The grade is the first group of `grade_pattern`
in its last reply: C and I (and P with partial credit) become ordered
grades; other letters from a custom pattern stay strings; a reply with no
grade is recorded as no grade, with the judge's text kept.

With `judges=[...]` a panel grades each sample instead of one judge: every judge
at once, their grades combined by `combine=` (see `panel.py`), each judge's model,
grade and reply kept in the score's metadata under `"judges"`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

import anyio

from .._errors import ConfigError, ScorerError, factory
from .._logging import log
from ..chats.chat import Chat
from ..samples import Score, SolvedSample
from .panel import Combine, resolve_combine

__all__ = [
    "FACT_TEMPLATE",
    "QA_TEMPLATE",
    "fill_template",
    "fresh_chat",
    "model_graded_fact",
    "model_graded_qa",
]

QA_TEMPLATE = """You are grading an answer to a task against a criterion.

[BEGIN DATA]
***
[Task]: {input}
***
[Submission]: {answer}
***
[Criterion]: {criterion}
***
[END DATA]

Does the submission meet the criterion?

{instructions}"""

FACT_TEMPLATE = """You are checking whether a submitted answer holds the facts of an expert answer.

[BEGIN DATA]
***
[Question]: {input}
***
[Expert]: {criterion}
***
[Submission]: {answer}
***
[END DATA]

Compare the facts of the submission with the expert answer. Ignore style,
grammar and punctuation. Does the submission contain the content of the
expert answer?

{instructions}"""


def default_instructions(partial_credit: bool) -> str:
    """What the judge is told about the grades and the form of its reply."""
    if partial_credit:
        letters = "C, P, or I"
        meaning = (
            "'C' for a correct answer, 'P' for a partially correct one, 'I' for an incorrect one"
        )
    else:
        letters = "C or I"
        meaning = "'C' for a correct answer, 'I' for an incorrect one"
    return (
        f"Reply with 'GRADE: $LETTER' where LETTER is one of {letters}: {meaning}.\n"
        "First briefly explain your reasoning, then end with GRADE: $LETTER on its own line. "
        "Do not format the grade and do not add anything after it."
    )


DEFAULT_PATTERN = r"(?i)GRADE\s*:\s*([CPI])(.*)$"

_FIELD = re.compile(r"\{(input|answer|criterion|instructions)\}")


def fill_template(template: str, values: dict[str, str]) -> str:
    """Fill `{input}`, `{answer}`, `{criterion}` and `{instructions}` in one pass.

    Only the template is scanned, so a value that itself holds `{criterion}`
    stays as written; any other braces (a JSON example) stay literal.

    Example:
        >>> fill_template('{answer}: {criterion} {"x": 1}', {"answer": "{input}", "criterion": "4"})
        '{input}: 4 {"x": 1}'
    """
    return _FIELD.sub(lambda m: values.get(m[1], m[0]), template)


def fresh_chat(chat: Chat) -> Chat:
    """A new chat on `chat`'s model: same provider, base URL, key and limits;
    no system prompt, turns, tools or request parameters.

    Example:
        >>> judge = fresh_chat(solver_chat)
        >>> judge.turns, judge.tools, judge.system_prompt
        ([], [], None)
    """
    provider = copy.copy(chat.provider)
    provider.params = {}
    return Chat(provider)


def _judge_chat(scorer_chat: Any, sample: SolvedSample) -> Chat:
    if scorer_chat is not None:
        if callable(scorer_chat) and not isinstance(scorer_chat, Chat):
            chat = scorer_chat()
        else:
            chat = scorer_chat
        if not isinstance(chat, Chat):
            raise ConfigError(
                "`scorer_chat` must be a Chat or a function returning one, "
                f"not {type(chat).__name__}."
            )
        return chat.clone()
    if sample.solver_chat is None:
        raise ConfigError(
            "The judge defaults to the solver's model, but this solver returned no chat. "
            "Pass scorer_chat= (e.g. model_graded_qa(scorer_chat=ve.chat_openai(...)))."
        )
    return fresh_chat(sample.solver_chat)


class ModelGraded:
    """A judge scorer; `model_graded_qa()` and `model_graded_fact()` make these.

    Example:
        >>> judge = ve.model_graded_qa(scorer_chat=ve.chat_mock())
        >>> isinstance(judge, ve.ModelGraded), judge.partial_credit
        (True, False)
        >>> task = ve.Task([{"input": "What's 2+2?", "target": "4"}],
        ...                ve.generate(ve.chat_mock()), judge)
        >>> task.eval(progress=False).get_samples()["score"].to_list()
        ['C']
    """

    def __init__(
        self,
        name: str,
        template: str,
        instructions: str | None,
        grade_pattern: str,
        partial_credit: bool,
        scorer_chat: Any,
        given: dict[str, Any] | None = None,
        judges: Sequence[Chat] | None = None,
        combine: Combine = "majority",
    ) -> None:
        self.__name__ = name
        #: The panel's judges (None: one judge, `scorer_chat`).
        self.judges = _check_judges(name, judges, scorer_chat)
        self.combine = combine
        self._combine = resolve_combine(name, combine)
        #: The arguments given other than their defaults (and the judge), for the label.
        self.given = given or {}
        self.template = template
        self.instructions = instructions
        self.partial_credit = partial_credit
        self.scorer_chat = scorer_chat
        try:
            self.pattern = re.compile(grade_pattern)
        except re.error as exc:
            raise ConfigError(f"{name}: grade_pattern is not a valid regex ({exc}).") from exc
        if self.pattern.groups < 1:
            raise ConfigError(f"{name}: grade_pattern needs a capture group for the grade.")
        for field in ("{answer}", "{criterion}"):
            if field not in template:
                raise ConfigError(f"{name}: the template must contain {field}.")

    @property
    def __vitals_label__(self) -> str:
        """The scorer as logged: its name and the arguments given, then the judge's model
        when one was given (as R vitals labels it)."""
        shown = ", ".join(f"{k}={_shown(v)}" for k, v in self.given.items())
        chat = self.scorer_chat
        model = f" ({chat.provider.model_id})" if isinstance(chat, Chat) else ""
        if self.judges is not None:
            model = f" ({', '.join(j.provider.model_id for j in self.judges)})"
        return f"{self.__name__}({shown}){model}"

    def prompt(self, sample: SolvedSample) -> str:
        instructions = self.instructions or default_instructions(self.partial_credit)
        target = sample.target if isinstance(sample.target, str) else "\n".join(sample.target)
        question = sample.input if isinstance(sample.input, str) else str(sample.input)
        values = {
            "input": question,
            "answer": sample.result,
            "criterion": target,
            "instructions": instructions,
        }
        return fill_template(self.template, values)

    def grade(self, reply: str) -> str | None:
        match = self.pattern.search(reply)
        if match is None or match.group(1) is None:
            return None
        letter = match.group(1).strip().upper()
        if letter == "P" and not self.partial_credit and self.pattern.pattern == DEFAULT_PATTERN:
            return None  # a partial grade where none was offered is off-protocol: no grade
        return letter

    async def __call__(self, sample: SolvedSample, *, scorer_chat: Any = None) -> Score:
        if self.judges is not None and scorer_chat is None:
            return await self._panel(sample, self.judges)
        judge = _judge_chat(scorer_chat if scorer_chat is not None else self.scorer_chat, sample)
        prompt = self.prompt(sample)
        reply = await judge.chat_async(prompt)
        grade = self.grade(reply)
        metadata: dict[str, Any] = {
            "grade_pattern": self.pattern.pattern,
            "judge_model": judge.provider.model_id,
        }
        if grade is None:
            log.warning(
                "judge gave no grade",
                scorer=self.__name__,
                sample_id=sample.id,
                epoch=sample.epoch,
                reply=reply[-200:],
            )
            metadata["no_grade"] = True
        return Score(grade, answer=sample.result, explanation=reply, metadata=metadata, chat=judge)

    async def _panel(self, sample: SolvedSample, judges: Sequence[Chat]) -> Score:
        """Every judge grades the sample at once; their grades combined into one value."""
        prompt = self.prompt(sample)
        chats = [judge.clone() for judge in judges]
        replies: list[str | BaseException] = [""] * len(chats)

        async def ask(i: int) -> None:
            try:
                replies[i] = await chats[i].chat_async(prompt)
            except Exception as exc:  # the first failure fails the sample, as one judge's does
                replies[i] = exc
                scope.cancel()

        async with anyio.create_task_group() as group:
            scope = group.cancel_scope
            for i in range(len(chats)):
                group.start_soon(ask, i)
        failed = next((r for r in replies if isinstance(r, BaseException)), None)
        if failed is not None:
            raise failed
        texts = [str(r) for r in replies]
        grades = [self.grade(text) for text in texts]
        panel = [
            {"model": chat.provider.model_id, "grade": grade, "explanation": text}
            for chat, grade, text in zip(chats, grades, texts, strict=True)
        ]
        metadata: dict[str, Any] = {
            "grade_pattern": self.pattern.pattern,
            "combine": self.combine if isinstance(self.combine, str) else _name(self.combine),
            "judges": panel,
        }
        value = self._combine(grades)
        if value is None:
            log.warning(
                "no judge of the panel gave a grade",
                scorer=self.__name__,
                sample_id=sample.id,
                epoch=sample.epoch,
            )
            metadata["no_grade"] = True
        explanation = "\n\n".join(
            f"{j['model']}: {j['grade'] or 'no grade'}\n{j['explanation']}" for j in panel
        )
        return Score(value, answer=sample.result, explanation=explanation, metadata=metadata)

    def __repr__(self) -> str:
        return f"<{self.__vitals_label__}>"


def _name(fn: Any) -> str:
    return str(getattr(fn, "__name__", type(fn).__name__))


def _check_judges(name: str, judges: Any, scorer_chat: Any) -> list[Chat] | None:
    """The panel's judges, checked: a non-empty list of chats, not given with a judge."""
    if judges is None:
        return None
    if scorer_chat is not None:
        raise ConfigError(
            f"{name}: give either scorer_chat= (one judge) or judges= (a panel), not both."
        )
    if isinstance(judges, Chat) or not isinstance(judges, Sequence):
        raise ConfigError(f"{name}: judges must be a list of chats, not {type(judges).__name__}.")
    if not judges:
        raise ConfigError(f"{name}: judges is empty; give at least one chat.")
    for judge in judges:
        if not isinstance(judge, Chat):
            raise ConfigError(f"{name}: every judge must be a Chat, not {type(judge).__name__}.")
    return list(judges)


def _shown(value: Any, limit: int = 40) -> str:
    """An argument's value in a label: its repr, a long text cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 2] + "…" + text[-1]


def _given(
    template: str | None, instructions: str | None, grade_pattern: str, partial_credit: bool
) -> dict[str, Any]:
    """The arguments of a model-graded scorer given other than their defaults."""
    optional = {"template": template, "instructions": instructions}
    given: dict[str, Any] = {k: v for k, v in optional.items() if v is not None}
    if grade_pattern != DEFAULT_PATTERN:
        given["grade_pattern"] = grade_pattern
    if partial_credit:
        given["partial_credit"] = partial_credit
    return given


def _check_template(template: str | None, default: str) -> str:
    if template is None:
        return default
    if not isinstance(template, str):
        raise ScorerError(f"template must be a string, not {type(template).__name__}.")
    return template


@factory("scorer", "ve.model_graded_qa(), or scorer=ve.model_graded_qa(scorer_chat=judge)")
def model_graded_qa(
    template: str | None = None,
    instructions: str | None = None,
    grade_pattern: str = DEFAULT_PATTERN,
    partial_credit: bool = False,
    scorer_chat: Chat | Any = None,
    judges: Sequence[Chat] | None = None,
    combine: Combine = "majority",
) -> ModelGraded:
    """A judge that grades whether the answer meets the target as a criterion.

    Args:
        template: the judge's prompt, with `{input}`, `{answer}`, `{criterion}`
            and `{instructions}` (default: `QA_TEMPLATE`).
        instructions: replaces the default grading instructions.
        grade_pattern: regex whose first group is the grade, searched in the
            judge's last reply.
        partial_credit: offer P (partially correct) besides C and I.
        scorer_chat: the judge (a Chat or a function returning one); default
            a fresh chat on the solver's model. Replace per run with
            `task.eval(scorer_chat=...)` (which, for that run, also replaces a panel).
        judges: a panel of judges (chats) instead of `scorer_chat`: each grades every
            sample, all at once; each one's model, grade and reply are in the score's
            metadata under `"judges"`, and the panel's agreement (Krippendorff's alpha)
            in the log and the summary.
        combine: how a panel's grades make the score: `"majority"` (a tie goes to the
            lowest tied grade), `"mean"` (C = 1, P = 0.5, I = 0, kept as a number in
            0..1), `"min"`, `"max"`, or a function of the list of grades (one per
            judge, None where one gave none) returning the value.

    Example:
        >>> Task(dataset, generate(chat), scorer=model_graded_qa(partial_credit=True))
        >>> panel = [chat_openai("gpt-5.4"), chat_anthropic("claude-sonnet-4-5")]
        >>> Task(dataset, generate(chat), scorer=model_graded_qa(judges=panel, combine="min"))
    """
    given = _given(template, instructions, grade_pattern, partial_credit)
    template = _check_template(template, QA_TEMPLATE)
    if judges is not None:
        given["combine"] = combine if isinstance(combine, str) else _name(combine)
    args = (instructions, grade_pattern, partial_credit, scorer_chat, given, judges, combine)
    return ModelGraded("model_graded_qa", template, *args)


@factory("scorer", "ve.model_graded_fact(), or scorer=ve.model_graded_fact(scorer_chat=judge)")
def model_graded_fact(
    template: str | None = None,
    instructions: str | None = None,
    grade_pattern: str = DEFAULT_PATTERN,
    partial_credit: bool = False,
    scorer_chat: Chat | Any = None,
    judges: Sequence[Chat] | None = None,
    combine: Combine = "majority",
) -> ModelGraded:
    """A judge that checks the answer contains the facts of the target (an expert answer).

    Takes the same arguments as `model_graded_qa`; the default template is
    `FACT_TEMPLATE`.

    Example:
        >>> Task(dataset, generate(chat), scorer=model_graded_fact(scorer_chat=judge))
        >>> Task(dataset, generate(chat), scorer=model_graded_fact(judges=[a, b, c]))
    """
    given = _given(template, instructions, grade_pattern, partial_credit)
    template = _check_template(template, FACT_TEMPLATE)
    if judges is not None:
        given["combine"] = combine if isinstance(combine, str) else _name(combine)
    args = (instructions, grade_pattern, partial_credit, scorer_chat, given, judges, combine)
    return ModelGraded("model_graded_fact", template, *args)
