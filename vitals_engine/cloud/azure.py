"""Microsoft Entra ID tokens for Azure OpenAI, through azure-identity (the `azure` extra).

A token is asked for the scope `https://cognitiveservices.azure.com/.default`, from the
user's credential (any object with `get_token(scope)`: an azure.core `TokenCredential`
such as `ManagedIdentityCredential`), or from azure-identity's `DefaultAzureCredential`
(environment, workload identity, managed identity, the Azure CLI ...), built only when
no key and no credential was given. It is held in a `RefreshingCredential`, loaded again
`margin` seconds before the AccessToken's `expires_on`; every call into azure-identity
blocks (its HTTP to the identity endpoint), so it runs in a worker thread.

A `token_provider` (a callable returning a token string, e.g. azure-identity's
`get_bearer_token_provider(...)`, which keeps and refreshes its own token) is asked for
each attempt, in a worker thread as well.

Example:
    >>> token = EntraToken(credential=ManagedIdentityCredential())
    >>> headers = {"authorization": f"Bearer {await token.get()}"}
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from typing import Any

import anyio.to_thread

from .._errors import AuthenticationError, ConfigError, ProviderUnavailable
from .extras import require
from .refresh import DEFAULT_MARGIN, RefreshingCredential

__all__ = ["SCOPE", "EntraToken", "azure_identity_installed"]

#: The scope of Azure OpenAI's (Azure AI services') tokens.
SCOPE = "https://cognitiveservices.azure.com/.default"
_PLATFORM = "Azure OpenAI"


def azure_identity_installed() -> bool:
    """Whether azure-identity can be imported (without importing it).

    Example:
        >>> azure_identity_installed()
        True
    """
    try:
        return importlib.util.find_spec("azure.identity") is not None
    except ModuleNotFoundError:
        return False


def _default_credential() -> Any:
    identity = require("azure.identity", extra="azure", platform=_PLATFORM)
    return identity.DefaultAzureCredential()


class EntraToken:
    """The bearer token of one chat: from `credential` (or DefaultAzureCredential when
    neither it nor `token_provider` is given), refreshed before it expires, or from
    `token_provider` at each attempt."""

    def __init__(
        self,
        credential: Any = None,
        token_provider: Callable[[], str] | None = None,
        *,
        margin: float = DEFAULT_MARGIN,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._credential = credential
        self._provider = token_provider
        self._last: str | None = None
        #: The token held, refreshed before it expires (None with a `token_provider`).
        self.held: RefreshingCredential[str] | None = None
        if token_provider is None:
            self.held = RefreshingCredential(
                self._load, what="the Microsoft Entra ID token", margin=margin, clock=clock
            )

    @property
    def uses_default(self) -> bool:
        """Whether the token comes from DefaultAzureCredential (no credential given)."""
        return self._credential is None and self._provider is None

    def _load(self) -> tuple[str, float | None]:
        if self._credential is None:
            self._credential = _default_credential()
        try:
            token = self._credential.get_token(SCOPE)
        except Exception as exc:
            raise _token_error(exc) from None
        expires = getattr(token, "expires_on", None)
        return token.token, float(expires) if expires is not None else None

    async def get(self) -> str:
        """The token for one attempt (loaded in a worker thread when none is fresh)."""
        if self.held is not None:
            value = await self.held.get()
        else:
            assert self._provider is not None
            value = await anyio.to_thread.run_sync(self._provider)
            if not isinstance(value, str) or not value:
                raise ConfigError(
                    "token_provider must return the token as a non-empty string, "
                    f"not {type(value).__name__}"
                )
        self._last = value
        return value

    def invalidate(self) -> None:
        """Forget the token held: the next attempt loads a new one."""
        if self.held is not None:
            self.held.invalidate()

    def current(self) -> tuple[str, ...]:
        """The token last handed out (to take out of error messages)."""
        return (self._last,) if self._last else ()

    def __repr__(self) -> str:
        source = (
            "token_provider"
            if self._provider is not None
            else "DefaultAzureCredential"
            if self._credential is None
            else type(self._credential).__name__
        )
        return f"<EntraToken from {source}>"


_SIGN_IN = (
    "pass api_key= or set AZURE_OPENAI_API_KEY; or sign in for Microsoft Entra ID: `az login` "
    "on your machine, AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET for a service "
    "principal, or a managed identity on Azure (its role on the resource: Cognitive Services "
    "OpenAI User)"
)


def _token_error(exc: Exception) -> Exception:
    """Our error for a credential that gave no token: a network failure on the way to the
    identity endpoint may pass (retried); anything else is the credential's refusal."""
    errors = require("azure.core.exceptions", extra="azure", platform=_PLATFORM)
    said = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    if isinstance(exc, errors.ServiceRequestError | errors.ServiceResponseError):
        return ProviderUnavailable(
            f"the Microsoft Entra ID token endpoint could not be reached: {said}",
            provider=_PLATFORM,
        )
    return AuthenticationError(
        f"no Microsoft Entra ID token for {_PLATFORM} ({said}): {_SIGN_IN}.",
        provider=_PLATFORM,
    )
