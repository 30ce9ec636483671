"""Replicas for the end-to-end tests and perf/replicas.py: `judge-mcp serve --transport http` processes on one
PostgreSQL database behind a real nginx (Debian's package), round-robin, on loopback ports.

`Nginx` writes its configuration to a temporary folder (an access log line per request names the replica that
served it), starts nginx in the foreground on a free loopback port and stops it. Where no nginx exists the tests
that need it are skipped with that reason, except under CI, where `.ci/run` installs it and a skip is a failure.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from testkit.server_process import HttpServer, free_port, server_env


def nginx_binary() -> str | None:
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None


CONFIG = """\
{user}worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format replica '$upstream_addr $status $request_method $request_uri';
    access_log {root}/access.log replica;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    upstream judge {{
{servers}
        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://judge;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_read_timeout 300s;
            proxy_next_upstream error timeout;
        }}
    }}
}}
"""


class Nginx:
    """nginx in the foreground, round-robin over `upstreams` (loopback ports), listening on a free loopback port."""

    def __init__(self, upstreams: list[int]):
        binary = nginx_binary()
        if binary is None:
            raise RuntimeError("no nginx on this machine: apt-get install nginx")
        self.root = Path(tempfile.mkdtemp(prefix="judge-mcp-nginx-"))
        self.port = free_port()
        servers = "\n".join(f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=30s;" for p in upstreams)
        user = "user root root;\n" if os.geteuid() == 0 else ""  # as root, workers would otherwise run as nobody
        (self.root / "nginx.conf").write_text(CONFIG.format(user=user, root=self.root, servers=servers, port=self.port))
        self.proc = subprocess.Popen(
            [binary, "-p", str(self.root), "-c", str(self.root / "nginx.conf"), "-e", str(self.root / "error.log"), "-g", "daemon off;"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)  # polling for the port
        self.stop()
        raise RuntimeError(f"nginx did not start: {self.error_log()}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def served_by(self) -> Counter[str]:
        """POSTs to /mcp answered, by the replica address that served them."""
        counts: Counter[str] = Counter()
        path = self.root / "access.log"
        for line in path.read_text().splitlines() if path.exists() else []:
            parts = line.split()
            if len(parts) >= 4 and parts[2] == "POST" and parts[1] == "200":
                counts[parts[0]] += 1
        return counts

    def error_log(self) -> str:
        try:
            return (self.root / "error.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: finish the requests in progress
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        shutil.rmtree(self.root, ignore_errors=True)


class Replicas:
    """`n` replicas (`serve --transport http --stateless`) on database `db_url` with backend `base_url`, behind nginx.
    Each replica's log is in `folder`."""

    def __init__(self, n: int, db_url: str, base_url: str, folder: Path, **env: str):
        self.folder = folder
        settings = {"JUDGE_MCP_HTTP_STATELESS": "1", "JUDGE_MCP_MAX_RETRIES": "0", **env}
        self.servers: list[HttpServer] = []
        try:
            for k in range(n):
                self.servers.append(HttpServer(server_env(base_url, db_url, **settings), log=folder / f"replica{k}.log"))
            self.nginx = Nginx([s.port for s in self.servers])
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return self.nginx.url

    def log(self, k: int) -> str:
        return (self.folder / f"replica{k}.log").read_text(errors="replace")

    def stop(self) -> None:
        nginx = getattr(self, "nginx", None)
        if nginx is not None:
            nginx.stop()
        for server in self.servers:  # all told at once, then each waited for
            if server.proc.poll() is None:
                server.proc.terminate()
        for server in self.servers:
            server.stop()
