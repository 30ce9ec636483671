"""How a backend call fails: `RetryableError` and `FatalError` inside one attempt, `BackendError` once the call
has failed for good. Their own module, so the retry loop and the backends import them without importing each
other."""

from __future__ import annotations


class BackendError(Exception):
    """A backend call that failed for good. The message names the backend and the cause."""

    def __init__(self, backend: str, cause: str, *, status: int | None = None, attempts: int = 1, where: str = ""):
        self.backend = backend
        self.cause = cause
        self.status = status
        self.attempts = attempts
        # `where`: the backend's kind, endpoint (credentials stripped) and model, so the message says what to fix
        super().__init__(failure_message(backend, cause, attempts, where))


def failure_message(backend: str, cause: str, attempts: int, where: str) -> str:
    """"backend 'B' (where) failed[ after N attempts]: cause", the attempts only when there was more than one; a cause
    that already opens with "backend 'B'" is the whole message (no sentence names the backend twice)."""
    named = f"backend '{backend}'"
    if cause.startswith(named):  # e.g. a cause that already says "backend 'default' (openai at ..., model ...) ..."
        return cause if attempts <= 1 else f"{cause} (after {attempts} attempts)"
    return f"{named}{f' ({where})' if where else ''} failed{f' after {attempts} attempts' if attempts > 1 else ''}: {cause}"


class RetryableError(Exception):
    """A failure worth another attempt: connection errors, timeouts, 408/409/429/5xx."""

    def __init__(self, cause: str, *, status: int | None = None, retry_after: float | None = None):
        self.cause = cause
        self.status = status
        self.retry_after = retry_after
        super().__init__(cause)


class FatalError(Exception):
    """A failure another attempt would not fix: other 4xx, a malformed request, a missing model file."""

    def __init__(self, cause: str, *, status: int | None = None):
        self.cause = cause
        self.status = status
        super().__init__(cause)


class AttemptTimeout(TimeoutError):
    """One attempt ran out of time in a named phase (no first byte of the reply, or a reply that stopped arriving).
    Retried like any timeout (see retry.RetryPolicy.max_timeout_retries); its message says which phase."""
