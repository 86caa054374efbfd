"""The project's own identity provider, for the tests and ``make run``'s single sign-on: a real
OpenID Provider process (tools/oidc-provider, built from zitadel/oidc's Go module by its build.sh
and cached outside the clone) with a user directory file. It lived in tests/support until the live
demo started it too (issue 43: single sign-on could not be tried without reading the provider's Go
source and the tests); one start code for both.

``provider.set_groups(user_id, [...])`` rewrites the directory: the provider reads groups from it at
every token and userinfo request, so the next login carries them. ``provider.portal_settings()`` is
what the portal needs to use it (``provider.environment()``: the same, for another process);
``provider.access_token(...)`` signs a user in without a browser
(authorization code flow with PKCE, as a command-line client would) and returns the JWT access token.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import requests

from devstack.go_tools import NO_GO, run_build
from devstack.ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO_ROOT / "tools" / "oidc-provider" / "build.sh"
NOT_BUILT = 3  # tools/go-build.sh's exit status with GO_BUILD_CACHED_ONLY set, when the binary is not built
CLIENT_ID, CLIENT_SECRET = "portal", "portal-secret"
# settings whose environment variable is named otherwise (mozilla-django-oidc's RP_/OP_ are the settings')
ENVIRONMENT_NAMES = {
    "OIDC_RP_CLIENT_ID": "OIDC_CLIENT_ID", "OIDC_RP_CLIENT_SECRET": "OIDC_CLIENT_SECRET",
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "OIDC_AUTHORIZATION_ENDPOINT", "OIDC_OP_TOKEN_ENDPOINT": "OIDC_TOKEN_ENDPOINT",
    "OIDC_OP_USER_ENDPOINT": "OIDC_USERINFO_ENDPOINT", "OIDC_OP_JWKS_ENDPOINT": "OIDC_JWKS_ENDPOINT",
}
REDIRECT_FOR_CLI = "http://127.0.0.1:1/cli-callback"  # never served: access_token() reads the code off it


class ProviderUnavailable(RuntimeError):
    """No Go toolchain to build the provider with, or (``cached_only``) not built yet."""


def build_binary(cached_only: bool = False) -> Path:
    """The provider's binary, built when missing; ``cached_only``: only if built already (``make
    run`` does not spend a build on it), else :class:`ProviderUnavailable`."""
    result = run_build(BUILD_SCRIPT, env={**os.environ, "GO_BUILD_CACHED_ONLY": "1"} if cached_only else None)
    if result.returncode == NOT_BUILT:
        raise ProviderUnavailable(f"the OpenID provider is not built: `bash {BUILD_SCRIPT.relative_to(REPO_ROOT)}` "
                                  "(about 40 s once, with Go) or `make test-deps` builds it")
    if result.returncode == NO_GO:
        raise ProviderUnavailable("the OpenID provider is built from Go modules: install Go")
    if result.returncode:
        raise RuntimeError(f"building the OIDC provider failed:\n{result.stderr[-4000:]}")
    return result.path / "oidc-provider"


@dataclass
class OidcProvider:
    workdir: Path
    redirect_uris: list[str]
    access_token_ttl: str = "5m"
    name: str = "Test IdP"  # the login page's "Sign in with <name>"
    users: dict[str, dict] = field(default_factory=dict)
    port: int = 0
    process: subprocess.Popen | None = None

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def add_user(self, user_id: str, username: str, password: str, groups: list[str]) -> None:
        self.users[user_id] = {
            "ID": user_id,
            "Username": username,
            "Password": password,
            "Email": f"{username}@example.com",
            "EmailVerified": True,
            "FirstName": username.title(),
            "LastName": "Tester",
            "Groups": groups,
        }
        self._write()

    def set_groups(self, user_id: str, groups: list[str]) -> None:
        self.users[user_id]["Groups"] = groups
        self._write()

    def _write(self) -> None:
        partial = self.workdir / "users.json.partial"
        partial.write_text(json.dumps(self.users))
        partial.replace(self.workdir / "users.json")  # never read half-written

    def start(self, binary: Path | None = None) -> None:
        """Starts (or restarts: new signing keys, sessions forgotten) and waits for discovery;
        ``binary``: the provider's, else built when missing."""
        self.stop()
        self.port = self.port or free_port()
        log = open(self.workdir / "provider.log", "ab")  # noqa: SIM115 - the process holds it
        self.process = subprocess.Popen(
            [
                str(binary or build_binary()),
                "-listen",
                f"127.0.0.1:{self.port}",
                "-issuer",
                self.issuer,
                "-users",
                str(self.workdir / "users.json"),
                "-client-id",
                CLIENT_ID,
                "-client-secret",
                CLIENT_SECRET,
                "-redirect-uris",
                ",".join([*self.redirect_uris, REDIRECT_FOR_CLI]),
                "-access-token-ttl",
                self.access_token_ttl,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120  # bounds a provider that never starts: tens of seconds on a busy machine
        while True:
            try:
                if requests.get(f"{self.issuer}.well-known/openid-configuration", timeout=1).ok:
                    return
            except requests.ConnectionError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the OIDC provider did not start:\n{(self.workdir / 'provider.log').read_text()}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def portal_settings(self) -> dict[str, str]:
        return {
            "OIDC_RP_CLIENT_ID": CLIENT_ID,
            "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_ISSUER": self.issuer,
            "OIDC_OP_AUTHORIZATION_ENDPOINT": f"{self.issuer}auth",
            "OIDC_OP_TOKEN_ENDPOINT": f"{self.issuer}oauth/token",
            "OIDC_OP_USER_ENDPOINT": f"{self.issuer}userinfo",
            "OIDC_OP_JWKS_ENDPOINT": f"{self.issuer}keys",
            "OIDC_PROVIDER_NAME": self.name,
        }

    def environment(self) -> dict[str, str]:
        """:meth:`portal_settings` as the environment of another process (the portal and gateway
        ``make run`` starts) spells them: config/settings/base.py's names."""
        return {ENVIRONMENT_NAMES.get(name, name): value for name, value in self.portal_settings().items()}

    def access_token(self, username: str, password: str, scope: str = "openid profile email groups") -> str:
        """The user's JWT access token, through the login page (authorization code + PKCE)."""
        return self.tokens(username, password, scope)["access_token"]

    def tokens(self, username: str, password: str, scope: str = "openid profile email groups",
               nonce: str | None = None) -> dict:
        """The token endpoint's answer for the user (access and ID tokens), as access_token() signs in."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        session = requests.Session()
        login_page = session.get(
            f"{self.issuer}auth",
            params={
                "client_id": CLIENT_ID,
                "redirect_uri": REDIRECT_FOR_CLI,
                "response_type": "code",
                "scope": scope,
                "state": "s",
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                **({"nonce": nonce} if nonce else {}),
            },
            timeout=10,
        )
        request_id = parse_qs(urlsplit(login_page.url).query)["authRequestID"][0]
        done = session.post(
            f"{self.issuer}login/username",
            data={"id": request_id, "username": username, "password": password},
            allow_redirects=False,
            timeout=10,
        )
        callback = session.get(done.headers["Location"], allow_redirects=False, timeout=10)
        code = parse_qs(urlsplit(callback.headers["Location"]).query)["code"][0]
        tokens = requests.post(
            f"{self.issuer}oauth/token",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": REDIRECT_FOR_CLI,
                "code_verifier": verifier,
            },
            auth=(CLIENT_ID, CLIENT_SECRET),
            timeout=10,
        )
        tokens.raise_for_status()
        return tokens.json()
