"""What the cloud platforms' tests share: an AWS environment of nothing but the mock's
(its test keys, or none), and credentials whose tokens the mock issues, as Azure's
identity endpoint and Google's metadata server would."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from vitals_engine.testing.formats.aws import TEST_ACCESS_KEY, TEST_SECRET_KEY
from vitals_engine.testing.formats.azure_openai import AZURE

__all__ = ["EntraCredential", "GoogleCredentials", "no_aws_of_this_machine", "use_aws_test_keys"]


def no_aws_of_this_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """An AWS environment without this machine's keys, profiles, files or instance role."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def use_aws_test_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The mock's test key pair in the environment, and nothing else of AWS."""
    no_aws_of_this_machine(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", TEST_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", TEST_SECRET_KEY)


class EntraCredential:
    """An azure.core TokenCredential whose tokens the mock issues."""

    def __init__(self) -> None:
        self.asked = 0

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        self.asked += 1
        token, expires = AZURE.issue()
        return type("AccessToken", (), {"token": token, "expires_on": int(expires)})()


class GoogleCredentials:
    """google-auth credentials whose tokens the mock issues, as the metadata server does."""

    def __init__(self, server: Any) -> None:
        self._vertex = server.wire_format("vertex")
        self.token: str | None = None
        self.expiry: datetime.datetime | None = None
        self.quota_project_id = None

    def refresh(self, request: Any) -> None:
        answer = self._vertex.issue("metadata")
        self.token = answer["access_token"]
        now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
        self.expiry = now + datetime.timedelta(seconds=answer["expires_in"])
