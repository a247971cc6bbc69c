"""vitals-engine: evaluate products built on large language models.

Example:
    >>> import vitals_engine as ve
    >>> task = ve.Task(
    ...     dataset=[{"input": "What's 2+2?", "target": "4"}],
    ...     solver=ve.generate(ve.chat_mock()),
    ...     scorer=ve.detect_includes(),
    ... )
    >>> task.eval().metrics
    {'accuracy': 1.0}
"""

from . import datasets
from ._errors import (
    AuthenticationError,
    ConfigError,
    DatasetError,
    EvalFailedError,
    ExtractionError,
    JournalInUseError,
    LogFormatError,
    LogWriteError,
    MalformedResponse,
    MetricError,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimitError,
    ScorerError,
    SolverError,
    TaskStateError,
    VitalsError,
)
from .analysis import bind, read_logs
from .chats.chat import Chat
from .chats.constructors import (
    chat,
    chat_anthropic,
    chat_deepseek,
    chat_google_gemini,
    chat_groq,
    chat_mock,
    chat_ollama,
    chat_openai,
    chat_openrouter,
    chat_vllm,
)
from .config import log_dir, log_dir_set
from .distributed.backend import Ray
from .engine.calls import batch_scorer, batch_solver
from .log.logged_eval import LoggedEval
from .log.reader import read_log
from .metrics import accuracy
from .pacing.limits import Limits
from .pacing.retry import Retry
from .report import summary
from .samples import Sample, SampleRecord, Score, Solution, SolvedSample
from .scorers import (
    detect_answer,
    detect_exact,
    detect_includes,
    detect_match,
    detect_pattern,
    model_graded_fact,
    model_graded_qa,
)
from .solvers import generate, generate_structured
from .task.task import Task
from .transport.base import Timeouts
from .viewer.bundle import bundle
from .viewer.launch import view
from .vocab.calls import RetryNote
from .vocab.pricing import set_price
from .vocab.turns import (
    ContentImage,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    TokenUsage,
    Turn,
)

__all__ = [
    "AuthenticationError",
    "Chat",
    "ConfigError",
    "ContentImage",
    "ContentText",
    "ContentThinking",
    "ContentToolRequest",
    "ContentToolResult",
    "DatasetError",
    "EvalFailedError",
    "ExtractionError",
    "JournalInUseError",
    "Limits",
    "LogFormatError",
    "LogWriteError",
    "LoggedEval",
    "MalformedResponse",
    "MetricError",
    "ProviderError",
    "ProviderTimeout",
    "ProviderUnavailable",
    "RateLimitError",
    "Ray",
    "Retry",
    "RetryNote",
    "Sample",
    "SampleRecord",
    "Score",
    "ScorerError",
    "Solution",
    "SolvedSample",
    "SolverError",
    "Task",
    "TaskStateError",
    "Timeouts",
    "TokenUsage",
    "Turn",
    "VitalsError",
    "accuracy",
    "batch_scorer",
    "batch_solver",
    "bind",
    "bundle",
    "chat",
    "chat_anthropic",
    "chat_deepseek",
    "chat_google_gemini",
    "chat_groq",
    "chat_mock",
    "chat_ollama",
    "chat_openai",
    "chat_openrouter",
    "chat_vllm",
    "datasets",
    "detect_answer",
    "detect_exact",
    "detect_includes",
    "detect_match",
    "detect_pattern",
    "generate",
    "generate_structured",
    "log_dir",
    "log_dir_set",
    "model_graded_fact",
    "model_graded_qa",
    "read_log",
    "read_logs",
    "set_price",
    "summary",
    "view",
]
