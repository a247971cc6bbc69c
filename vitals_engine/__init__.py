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

import importlib as _importlib
import typing as _typing

from ._errors import (
    AgentCliError,
    AuthenticationError,
    BatchUnsupported,
    BudgetExceeded,
    ConfigError,
    DatasetError,
    EvalFailedError,
    EvalSetFailedError,
    ExtractionError,
    InvalidScore,
    JournalInUseError,
    LogFormatError,
    LogWriteError,
    MalformedResponse,
    MetricError,
    NotALogError,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    QuotaExhausted,
    RateLimitError,
    SandboxError,
    ScorerError,
    SolverError,
    StoreAccessDenied,
    StoreError,
    StoreNotFound,
    StoreThrottled,
    StoreUnreachable,
    TaskStateError,
    ToolError,
    VitalsError,
    WorkerLostError,
)

if _typing.TYPE_CHECKING:
    from . import datasets
    from .agents.cli_install import install_agent
    from .agents.coding import agent_cli, claude_code, codex
    from .agents.harness import AgentCli
    from .agents.react import React, react
    from .agents.tools import bash, python, sandbox, text_editor
    from .analysis import (
        bind,
        read_logs,
    )
    from .bridging.server import BridgeAddress, bridge
    from .caching.options import Cache
    from .chats.by_name import chat
    from .chats.chat import Chat
    from .chats.cloud import chat_aws_bedrock, chat_azure_openai, chat_google_vertex
    from .chats.constructors import (
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
    from .chats.tools import Tool
    from .comparison import Comparison, ComparisonSet, compare, compare_models
    from .config import (
        log_dir,
        log_dir_set,
    )
    from .dataset_files import read_dataset
    from .distributed.backend import Ray
    from .engine.options import EvalOptions, ScoreOptions, SolveOptions
    from .engine.user_functions import (
        VectorizedFunction,
        vectorized_scorer,
        vectorized_solver,
    )
    from .log.logged_eval import LoggedEval
    from .metrics import accuracy
    from .pacing.batch_mode import Batch
    from .pacing.limits import RateLimits
    from .pacing.retry import Retry
    from .pricing.table import set_price
    from .providers.base import Provider
    from .report import summary
    from .rescoring import RescorableLog, read_log, rescore_log
    from .samples import (
        Sample,
        SampleRecord,
        Score,
        Solution,
        SolvedSample,
    )
    from .sandboxes.base import ExecResult, SandboxSpec
    from .scorers import (
        detect_answer,
        detect_exact,
        detect_includes,
        detect_match,
        detect_pattern,
        model_graded_fact,
        model_graded_qa,
    )
    from .scorers.model_graded import ModelGraded
    from .solvers import (
        Generate,
        GenerateStructured,
        generate,
        generate_structured,
    )
    from .statistics.corrected import CorrectedMean
    from .statistics.intervals import MetricStat
    from .task.estimate import Estimate
    from .task.eval_set import EvalSet, eval_set, eval_set_async
    from .task.streaming import SampleStream
    from .task.task import Task
    from .thresholds import ThresholdCheck, check_thresholds
    from .transport.base import Timeouts
    from .viewer.bundle import bundle
    from .viewer.launch import view
    from .viewer.server import ViewServer
    from .vocab.batch_records import BatchRecord
    from .vocab.model_calls import RetryNote
    from .vocab.turns import (
        ContentCompaction,
        ContentDocument,
        ContentImage,
        ContentText,
        ContentThinking,
        ContentToolRequest,
        ContentToolResult,
        TokenUsage,
        Turn,
    )

#: Where each public name lives: imported on first use (PEP 562), so `import
#: vitals_engine` costs milliseconds and a path loads only what it touches.
_LAZY: dict[str, str] = {
    "datasets": ".datasets",
    "AgentCli": ".agents.harness",
    "agent_cli": ".agents.coding",
    "claude_code": ".agents.coding",
    "codex": ".agents.coding",
    "install_agent": ".agents.cli_install",
    "bridge": ".bridging.server",
    "BridgeAddress": ".bridging.server",
    "React": ".agents.react",
    "react": ".agents.react",
    "bash": ".agents.tools",
    "python": ".agents.tools",
    "sandbox": ".agents.tools",
    "text_editor": ".agents.tools",
    "bind": ".analysis",
    "read_logs": ".analysis",
    "Cache": ".caching.options",
    "Chat": ".chats.chat",
    "chat": ".chats.by_name",
    "chat_anthropic": ".chats.constructors",
    "chat_aws_bedrock": ".chats.cloud",
    "chat_azure_openai": ".chats.cloud",
    "chat_deepseek": ".chats.constructors",
    "chat_google_gemini": ".chats.constructors",
    "chat_google_vertex": ".chats.cloud",
    "chat_groq": ".chats.constructors",
    "chat_mock": ".chats.constructors",
    "chat_ollama": ".chats.constructors",
    "chat_openai": ".chats.constructors",
    "chat_openrouter": ".chats.constructors",
    "chat_vllm": ".chats.constructors",
    "Tool": ".chats.tools",
    "Comparison": ".comparison",
    "ComparisonSet": ".comparison",
    "compare": ".comparison",
    "compare_models": ".comparison",
    "Ray": ".distributed.backend",
    "log_dir": ".config",
    "read_dataset": ".dataset_files",
    "log_dir_set": ".config",
    "VectorizedFunction": ".engine.user_functions",
    "EvalOptions": ".engine.options",
    "ScoreOptions": ".engine.options",
    "SolveOptions": ".engine.options",
    "vectorized_scorer": ".engine.user_functions",
    "vectorized_solver": ".engine.user_functions",
    "LoggedEval": ".log.logged_eval",
    "read_log": ".rescoring",
    "RescorableLog": ".rescoring",
    "rescore_log": ".rescoring",
    "accuracy": ".metrics",
    "Batch": ".pacing.batch_mode",
    "RateLimits": ".pacing.limits",
    "Retry": ".pacing.retry",
    "Provider": ".providers.base",
    "summary": ".report",
    "ThresholdCheck": ".thresholds",
    "check_thresholds": ".thresholds",
    "ExecResult": ".sandboxes.base",
    "SandboxSpec": ".sandboxes.base",
    "Sample": ".samples",
    "SampleRecord": ".samples",
    "Score": ".samples",
    "Solution": ".samples",
    "SolvedSample": ".samples",
    "ModelGraded": ".scorers.model_graded",
    "detect_answer": ".scorers",
    "detect_exact": ".scorers",
    "detect_includes": ".scorers",
    "detect_match": ".scorers",
    "detect_pattern": ".scorers",
    "model_graded_fact": ".scorers",
    "model_graded_qa": ".scorers",
    "Generate": ".solvers",
    "GenerateStructured": ".solvers",
    "generate": ".solvers",
    "generate_structured": ".solvers",
    "MetricStat": ".statistics.intervals",
    "CorrectedMean": ".statistics.corrected",
    "Estimate": ".task.estimate",
    "EvalSet": ".task.eval_set",
    "eval_set": ".task.eval_set",
    "eval_set_async": ".task.eval_set",
    "SampleStream": ".task.streaming",
    "Task": ".task.task",
    "Timeouts": ".transport.base",
    "bundle": ".viewer.bundle",
    "view": ".viewer.launch",
    "ViewServer": ".viewer.server",
    "BatchRecord": ".vocab.batch_records",
    "RetryNote": ".vocab.model_calls",
    "set_price": ".pricing.table",
    "ContentDocument": ".vocab.turns",
    "ContentImage": ".vocab.turns",
    "ContentText": ".vocab.turns",
    "ContentCompaction": ".vocab.turns",
    "ContentThinking": ".vocab.turns",
    "ContentToolRequest": ".vocab.turns",
    "ContentToolResult": ".vocab.turns",
    "TokenUsage": ".vocab.turns",
    "Turn": ".vocab.turns",
}

__all__ = [
    "AgentCli",
    "AgentCliError",
    "AuthenticationError",
    "Batch",
    "BatchRecord",
    "BatchUnsupported",
    "BridgeAddress",
    "BudgetExceeded",
    "Cache",
    "Chat",
    "Comparison",
    "ComparisonSet",
    "ConfigError",
    "ContentCompaction",
    "ContentDocument",
    "ContentImage",
    "ContentText",
    "ContentThinking",
    "ContentToolRequest",
    "ContentToolResult",
    "CorrectedMean",
    "DatasetError",
    "Estimate",
    "EvalFailedError",
    "EvalOptions",
    "EvalSet",
    "EvalSetFailedError",
    "ExecResult",
    "ExtractionError",
    "Generate",
    "GenerateStructured",
    "InvalidScore",
    "JournalInUseError",
    "LogFormatError",
    "LogWriteError",
    "LoggedEval",
    "MalformedResponse",
    "MetricError",
    "MetricStat",
    "ModelGraded",
    "NotALogError",
    "Provider",
    "ProviderError",
    "ProviderTimeout",
    "ProviderUnavailable",
    "QuotaExhausted",
    "RateLimitError",
    "RateLimits",
    "Ray",
    "React",
    "RescorableLog",
    "Retry",
    "RetryNote",
    "Sample",
    "SampleRecord",
    "SampleStream",
    "SandboxError",
    "SandboxSpec",
    "Score",
    "ScoreOptions",
    "ScorerError",
    "Solution",
    "SolveOptions",
    "SolvedSample",
    "SolverError",
    "StoreAccessDenied",
    "StoreError",
    "StoreNotFound",
    "StoreThrottled",
    "StoreUnreachable",
    "Task",
    "TaskStateError",
    "ThresholdCheck",
    "Timeouts",
    "TokenUsage",
    "Tool",
    "ToolError",
    "Turn",
    "VectorizedFunction",
    "ViewServer",
    "VitalsError",
    "WorkerLostError",
    "accuracy",
    "agent_cli",
    "bash",
    "bind",
    "bridge",
    "bundle",
    "chat",
    "chat_anthropic",
    "chat_aws_bedrock",
    "chat_azure_openai",
    "chat_deepseek",
    "chat_google_gemini",
    "chat_google_vertex",
    "chat_groq",
    "chat_mock",
    "chat_ollama",
    "chat_openai",
    "chat_openrouter",
    "chat_vllm",
    "check_thresholds",
    "claude_code",
    "codex",
    "compare",
    "compare_models",
    "datasets",
    "detect_answer",
    "detect_exact",
    "detect_includes",
    "detect_match",
    "detect_pattern",
    "eval_set",
    "eval_set_async",
    "generate",
    "generate_structured",
    "install_agent",
    "log_dir",
    "log_dir_set",
    "model_graded_fact",
    "model_graded_qa",
    "python",
    "react",
    "read_dataset",
    "read_log",
    "read_logs",
    "rescore_log",
    "sandbox",
    "set_price",
    "summary",
    "text_editor",
    "vectorized_scorer",
    "vectorized_solver",
    "view",
]


def __getattr__(name: str) -> _typing.Any:
    if name == "Limits":  # deprecated: the class warns when made
        from .pacing.limits import Limits

        return Limits
    module = _LAZY.get(name)
    if module is None:
        from ._deprecated import RENAMED, renamed

        new = RENAMED.get(name)
        if new is None:
            raise AttributeError(f"module 'vitals_engine' has no attribute {name!r}")
        renamed(name, new)
        return __getattr__(new)
    loaded = _importlib.import_module(module, __name__)
    value = loaded if module == f".{name}" else getattr(loaded, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
