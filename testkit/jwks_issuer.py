"""An OAuth issuer's key set (JWKS) on 127.0.0.1 for tests and perf scripts: real HTTP (a ThreadingHTTPServer in a
thread of its own), every fetch counted, and tokens signed with its key.

`mode` says how it answers a fetch: "ok" (the key set), "error" (HTTP 500), "slow" (the key set after `delay_s`),
"hold" (the key set only once `release()` is called: an issuer that hangs for as long as a test needs). `Blackhole`
is an address that accepts connections and never answers (an issuer unreachable behind a dropping firewall).
"""

from __future__ import annotations

import base64
import json
import secrets
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024
    daemon_threads = True


class JwksIssuer:
    """The issuer at `url` (its keys at `jwks_url`); `fetches` counts the key-set requests it received, `waiting` those
    not answered yet."""

    def __init__(self, mode: str = "ok", delay_s: float = 0.0) -> None:
        import jwt
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.mode, self.delay_s = mode, delay_s
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.kids = ["k1"]  # the kids it publishes (all for its one key): a test may add one, as a key rotation would
        self.fetches = self.waiting = 0
        self._lock = threading.Lock()
        self._released = threading.Event()
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                issuer._count(+1)
                try:
                    issuer._answer(self)
                finally:
                    issuer._count(-1, fetched=True)

        self._server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.jwks_url = f"{self.url}/.well-known/jwks.json"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _count(self, change: int, fetched: bool = False) -> None:
        with self._lock:
            self.waiting += change
            self.fetches += fetched

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        if self.mode == "slow":
            time.sleep(self.delay_s)
        elif self.mode == "hold":
            self._released.wait(120)
        if self.mode == "error":
            body, status = b'{"error": "server_error"}', 500
        else:
            body, status = json.dumps({"keys": [{**self._jwk, "kid": kid, "use": "sig", "alg": "RS256"} for kid in self.kids]}).encode(), 200
        try:
            handler.send_response(status)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        except OSError:  # the client gave up waiting
            pass

    def release(self) -> None:
        """Answer every held fetch (and the later ones at once)."""
        self._released.set()

    def __enter__(self) -> JwksIssuer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()

    def token(self, *, kid: str = "k1", forged: bool = False, audience: str = "judge-test", **claims: Any) -> str:
        """A JWT access token of this issuer (signed with another key when `forged`); a claim given as None is left out."""
        import jwt

        now = int(time.time())
        payload = {"iss": self.url, "aud": audience, "exp": now + 300, "iat": now, "sub": "u1", "tenant": "team-x", **claims}
        payload = {k: v for k, v in payload.items() if v is not None}
        return jwt.encode(payload, self.other if forged else self.key, algorithm="RS256", headers={"kid": kid})

    def bogus(self) -> str:
        """What an anonymous flood sends: a well-formed token with a random `kid` the issuer never published."""
        return self.token(kid=secrets.token_hex(8), forged=True)


def nested_header_token(depth: int = 5000) -> str:
    """A JWT-shaped token whose header is `depth` nested JSON arrays (a parser that recurses fails on it)."""
    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    return f"{part(b'[' * depth + b']' * depth)}.{part(b'{}')}.{part(b'sig')}"


class Blackhole:
    """A listening address on 127.0.0.1 that never accepts: connections complete (the backlog) and wait forever."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(4096)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self.jwks_url = f"{self.url}/.well-known/jwks.json"

    def __enter__(self) -> Blackhole:
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()
