"""A real PostgreSQL server for the tests and perf/replicas.py, started from the server binaries found on this machine (Debian's
`postgresql` package puts them in /usr/lib/postgresql/N/bin) in a temporary folder, on a loopback port, and
stopped when the tests are done. `initdb` and `postgres` refuse to run as root, so as root they run as the
`postgres` user (its folder is handed to it); as anyone else they run as that user.

Where no binaries exist the PostgreSQL tests are skipped with that reason, except under CI (`CI` set), where a
missing server is a failure: `.ci/run` installs it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from testkit.server_process import free_port

SUPERUSER = "judge"  # the cluster's superuser (trust authentication on the loopback port only)


def find_bindir() -> Path | None:
    """The folder holding initdb, pg_ctl and postgres: on PATH, else the newest /usr/lib/postgresql/N/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        real = Path(os.path.realpath(found)).parent
        if (real / "postgres").exists():
            return real
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0)
    for folder in reversed(candidates):
        if all((Path(folder) / tool).exists() for tool in ("initdb", "pg_ctl", "postgres")):
            return Path(folder)
    return None


def unavailable_reason() -> str | None:
    """Why no PostgreSQL server can be started here, or None when one can."""
    if find_bindir() is None:
        return "no PostgreSQL server binaries (initdb, pg_ctl, postgres) on this machine: apt-get install postgresql"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server as"
    return None


@dataclass
class PostgresServer:
    """One PostgreSQL cluster in a temporary folder. `url(db)` is a connection URL for database `db`."""

    bindir: Path
    root: Path
    port: int
    _user: str | None  # the OS user the server runs as (None: the current one)

    @classmethod
    def start(cls) -> PostgresServer:
        reason = unavailable_reason()
        if reason is not None:
            raise RuntimeError(reason)
        bindir = find_bindir()
        assert bindir is not None
        root = Path(tempfile.mkdtemp(prefix="judge-mcp-pg-"))
        user = "postgres" if os.geteuid() == 0 else None
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chmod(root, 0o700)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        server = cls(bindir, root, free_port(), user)
        server._run("initdb", "-D", str(root / "data"), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
        server._start()
        return server

    def _command(self, tool: str, *args: str) -> list[str]:
        cmd = [str(self.bindir / tool), *args]
        if self._user is not None:
            cmd = ["runuser", "-u", self._user, "--", *cmd]
        return cmd

    def _run(self, tool: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(self._command(tool, *args), capture_output=True, text=True, timeout=timeout, cwd=self.root)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
        return done

    def _start(self) -> None:
        options = (
            f"-h 127.0.0.1 -p {self.port} -k {self.root} -c fsync=off -c full_page_writes=off "
            "-c max_connections=200 -c shared_buffers=32MB"
        )
        self._run("pg_ctl", "-D", str(self.root / "data"), "-l", str(self.root / "server.log"), "-o", options, "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (`mode`: fast, or immediate for a crash-like stop)."""
        command = self._command("pg_ctl", "-D", str(self.root / "data"), "-m", mode, "-w", "-t", "60", "stop")
        subprocess.run(command, capture_output=True, cwd=self.root, timeout=90)

    def restart(self) -> None:
        self.stop("immediate")
        self._start()

    def close(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new, empty database `name`; its URL."""
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, name)
        return self.url(name)

    def require_password(self, role: str, password: str) -> str:
        """A login role that must give `password` (scram-sha-256 on the loopback port; every other role keeps trust);
        the URL of database `postgres` for it, without the password."""
        self._run("psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, "-d", "postgres", "-c",
                  f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        hba = self.root / "data" / "pg_hba.conf"
        hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        self._run("pg_ctl", "-D", str(self.root / "data"), "reload")
        time.sleep(0.3)  # the postmaster rereads pg_hba.conf on SIGHUP
        return f"postgresql://{role}@127.0.0.1:{self.port}/postgres"

    def log(self) -> str:
        try:
            return (self.root / "server.log").read_text(errors="replace")
        except OSError:
            return ""

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"PostgreSQL did not accept connections on port {self.port}")
