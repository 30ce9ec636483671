"""Issue 46, break 2 and the first smaller ones: a tokens file read while it is written, an edit that puts the file's
stamp back, reserved tenant names, a file others may read. TokenFile is driven by a fake clock (each `look()` is one
RECHECK_S later), so a test says exactly which state of the file each look finds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from judge_mcp import tenants
from judge_mcp.config.settings import ConfigError, load_settings
from judge_mcp.tenants import RECHECK_S, REREAD_S, TokenFile, TokenFileError, read_tokens_file, reserved_allowed
from testkit.server_process import clean_env
from tests.helpers import ROOT

TOKEN_A = "team-a-token-0123456789abcdef"
TOKEN_B = "team-b-token-fedcba9876543210"
TOKEN_C = "team-c-token-00112233445566778"
LINES = [f"{TOKEN_A} team-a\n", f"{TOKEN_B} alpha-eu\n", f"{TOKEN_C} team-c\n"]


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Watched:
    """A tokens file and the TokenFile of a running server reading it."""

    def __init__(self, tmp_path: Path, text: str = "".join(LINES), **options: object) -> None:
        self.path = tmp_path / "tokens"
        self.path.write_text(text)
        self.path.chmod(0o600)
        self.clock = _Clock()
        self.source = TokenFile(str(self.path), None, clock=self.clock, **options)  # type: ignore[arg-type]

    def look(self, seconds: float = RECHECK_S) -> dict[str, str | None]:
        self.clock.now += seconds
        table = self.source.tenants()
        return {token: table.tenant(token.encode()) for token in (TOKEN_A, TOKEN_B, TOKEN_C)}


FULL = {TOKEN_A: "team-a", TOKEN_B: "alpha-eu", TOKEN_C: "team-c"}


def test_a_file_rewritten_in_place_line_by_line_is_never_taken_half_written(tmp_path: Path, caplog) -> None:
    """On 254e9ed a look between two writes of a line-by-line rewrite took what it found: the last line's token was
    refused, and a read cut inside a tenant name turned `TOKEN alpha-eu` into `TOKEN alpha`. Now a change is taken
    only once the file has been still for RECHECK_S: every write of the rewrite is seen and none is taken."""
    watched = _Watched(tmp_path)
    for _ in range(3):  # the same tokens, rewritten in place one write at a time, a look after every write
        with open(watched.path, "r+b") as file:
            file.truncate(0)
            for line in LINES:
                for piece in (line[:-6], line[-6:]):  # each line in two writes: a look may fall inside a name
                    file.write(piece.encode())
                    file.flush()
                    assert watched.look() == FULL
        assert watched.look() == FULL
    in_place = [r for r in caplog.records if "rewritten in place" in r.getMessage()]
    assert in_place and "replace it atomically" in in_place[0].getMessage().lower()


def test_a_rewrite_that_stalls_inside_a_tenant_name_does_not_shorten_it(tmp_path: Path, caplog) -> None:
    """A writer that stops inside the last line for longer than RECHECK_S leaves a file that is still and parses:
    its last line has no newline and would shorten a tenant in use, so it is taken as still being written."""
    watched = _Watched(tmp_path)
    watched.path.write_text(LINES[0] + f"{TOKEN_B} alpha")
    assert [watched.look() for _ in range(4)] == [FULL] * 4
    assert "its last line has no newline and shortens a tenant name in use" in caplog.text
    watched.path.write_text(LINES[0] + LINES[1])  # the writer goes on: the whole file is taken
    watched.look()
    assert watched.look() == {TOKEN_A: "team-a", TOKEN_B: "alpha-eu", TOKEN_C: None}
    assert TOKEN_B not in caplog.text


def test_an_edit_that_puts_the_stamp_back_is_seen(tmp_path: Path) -> None:
    """On 254e9ed an edit keeping the size and inode and restoring the modification time was never seen: a removed
    token stayed valid. The change time moves anyway, and the content is hashed every REREAD_S."""
    watched = _Watched(tmp_path)
    before = os.stat(watched.path)
    revoked = "".join(LINES).replace(TOKEN_C, "x" * len(TOKEN_C))  # the same size
    with open(watched.path, "r+") as file:
        file.write(revoked)
    os.utime(watched.path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(watched.path).st_size == before.st_size and os.stat(watched.path).st_ino == before.st_ino
    watched.look()
    assert watched.look()[TOKEN_C] is None


def test_a_change_no_stat_can_see_is_found_by_the_periodic_reread(tmp_path: Path, monkeypatch) -> None:
    """A file system whose stamps do not move (a coarse clock, a network file system): the content's hash does."""
    watched = _Watched(tmp_path)
    monkeypatch.setattr(tenants, "_stamp", lambda path: (1, 1, 1, 1))
    watched.source._settled = watched.source._seen = ((1, 1, 1, 1), watched.source._settled[1])
    watched.path.write_text("".join(LINES[:2]))
    assert watched.look()[TOKEN_C] == "team-c"  # one stat sees nothing
    watched.look(REREAD_S)  # the reread finds new content
    assert watched.look()[TOKEN_C] is None  # still for RECHECK_S: taken


def test_a_file_replaced_atomically_or_touched_is_taken_without_a_warning(tmp_path: Path, caplog) -> None:
    watched = _Watched(tmp_path)
    os.utime(watched.path, ns=(1, 1))  # touched: a new stamp, the same content
    watched.look()
    assert watched.look() == FULL
    fresh = tmp_path / "tokens.new"
    fresh.write_text("".join(LINES[:2]))
    fresh.chmod(0o600)
    fresh.replace(watched.path)
    watched.look()
    assert watched.look()[TOKEN_C] is None
    assert "rewritten in place" not in caplog.text and "changed: reread, 2 token(s)" in caplog.text


@pytest.mark.parametrize("reserved", ["local", "default"])
def test_reserved_tenant_names_are_refused_unless_the_operator_allows_them(tmp_path: Path, reserved: str, caplog) -> None:
    """On 254e9ed a tokens-file tenant named `local` read the stdio user's state in the same database."""
    path = tmp_path / "tokens"
    path.write_text(f"{TOKEN_A} {reserved}\n")
    with pytest.raises(TokenFileError) as caught:
        read_tokens_file(path)
    assert f"line 1: tenant `{reserved}` is reserved" in str(caught.value)
    assert f"JUDGE_MCP_HTTP_RESERVED_TENANTS={reserved}" in str(caught.value) and TOKEN_A not in str(caught.value)
    assert read_tokens_file(path, reserved_allowed(f"{reserved}, ")) == {TOKEN_A: reserved}
    with pytest.raises(ConfigError, match="is reserved"):
        load_settings(clean_env(JUDGE_MCP_HTTP_TOKENS=str(path), JUDGE_MCP_DB=str(tmp_path / "judge.db")))
    # a running server logs a reread file naming it and keeps its tokens
    watched = _Watched(tmp_path)
    watched.path.write_text("".join(LINES) + f"{'r' * 30} {reserved}\n")
    watched.look()
    assert watched.look() == FULL and f"tenant `{reserved}` is reserved" in caplog.text


def test_the_reserved_tenants_setting_takes_only_reserved_names() -> None:
    assert reserved_allowed("") == frozenset() and reserved_allowed("local default") == {"local", "default"}
    with pytest.raises(ValueError, match="'team-a' is not a reserved tenant name"):
        reserved_allowed("default,team-a")
    with pytest.raises(ConfigError, match="JUDGE_MCP_HTTP_RESERVED_TENANTS: 'team-a'"):
        load_settings(clean_env(JUDGE_MCP_HTTP_RESERVED_TENANTS="team-a"))


def test_serve_refuses_a_tokens_file_naming_default_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"{TOKEN_A} default\n")
    path.chmod(0o600)
    env = clean_env(JUDGE_MCP_HTTP_TOKENS=str(path), JUDGE_MCP_DB=str(tmp_path / "judge.db"))
    done = subprocess.run([sys.executable, "-m", "judge_mcp", "serve", "--transport", "http", "--port", "0"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "tenant `default` is reserved" in done.stderr and "Traceback" not in done.stderr
    assert TOKEN_A not in done.stderr


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
@pytest.mark.parametrize(("mode", "warned"), [(0o644, "everyone"), (0o640, "its group"), (0o600, None)])
def test_a_tokens_file_others_may_read_draws_a_warning(tmp_path: Path, caplog, mode: int, warned: str | None) -> None:
    path = tmp_path / "tokens"
    path.write_text("".join(LINES))
    path.chmod(mode)
    TokenFile(str(path), None)
    if warned is None:
        assert "may be read" not in caplog.text
    else:
        assert f"may be read or written by {warned} (mode {mode:04o})" in caplog.text and f"chmod 600 {path}" in caplog.text
