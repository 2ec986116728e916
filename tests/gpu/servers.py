"""Real HTTP servers on loopback for the polling tests: a dcgm-exporter, a Prometheus, and (through
tests/billing/api_server.py) a hosted model API provider."""

import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

# (path, query) -> (status, content type, body); the query maps each name to its first value.
Route = Callable[[str, dict], tuple[int, str, str | bytes]]


class LoopbackServer:
    """Serves `route` on 127.0.0.1 in a thread. `requests` records each request's path and query
    (first values), `calls` its path, every query pair in order and its headers (lower-cased).
    A test can make it slow (`delay`, seconds before answering) or break its answers
    (`truncate`: the body stops short of its Content-Length and the connection closes;
    `not_http`: it answers a line that is no HTTP, as an SSH server on that port would)."""

    def __init__(self, route: Route):
        self.route = route
        self.requests: list[tuple[str, dict]] = []
        self.calls: list[tuple[str, list[tuple[str, str]], dict[str, str]]] = []
        self.delay = 0.0
        self.truncate = False
        self.not_http = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the name http.server calls
                parts = urlsplit(self.path)
                pairs = parse_qsl(parts.query)
                query: dict[str, str] = {}
                for key, value in pairs:
                    query.setdefault(key, value)
                server.requests.append((parts.path, query))
                server.calls.append(
                    (parts.path, pairs, {k.lower(): v for k, v in self.headers.items()})
                )
                status, content_type, body = server.route(parts.path, query)
                data = body.encode() if isinstance(body, str) else body
                if server.delay:
                    time.sleep(server.delay)
                if server.not_http:
                    self.wfile.write(b"SSH-2.0-OpenSSH_9.6\r\n")
                    self.close_connection = True
                    return
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data) + (100 if server.truncate else 0)))
                self.end_headers()
                self.wfile.write(data)
                if server.truncate:
                    self.close_connection = True

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "LoopbackServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def closed_port_url(path: str = "/metrics") -> str:
    """A loopback URL nothing listens on: connecting to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"


def dcgm_text(*, util: float, uuid: str = "GPU-live-0", host: str = "live-node") -> str:
    labels = f'gpu="0",UUID="{uuid}",device="nvidia0",modelName="NVIDIA L4",Hostname="{host}"'
    return (
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
        f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {util:g}\n"
        "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n"
        "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
        f"DCGM_FI_DEV_FB_USED{{{labels}}} 2048\n"
    )


PROMETHEUS_VALUES = {
    "DCGM_FI_DEV_GPU_UTIL": "60",
    "DCGM_FI_DEV_FB_USED": "1000",
    "DCGM_FI_DEV_FB_FREE": "22000",
    "DCGM_FI_DEV_POWER_USAGE": "55.5",
}


def prometheus_route(
    *,
    uuid: str = "GPU-prom-0",
    host: str = "prom-node",
    fail: Callable[[dict], bool] = lambda q: False,
) -> Route:
    """query_range as Prometheus answers it: points on multiples of the step in [start, end], and
    400 bad_data for a query over 11,000 points per series. The engine ratio is not exported
    (an L4 without DCGM's profiling module), so its query finds no series."""

    def route(path: str, query: dict) -> tuple[int, str, str]:
        if path != "/api/v1/query_range":
            return 404, "text/plain", "404 page not found\n"
        if fail(query):
            return (
                503,
                "application/json",
                json.dumps(
                    {"status": "error", "errorType": "unavailable", "error": "TSDB is not ready"}
                ),
            )
        start, end, step = float(query["start"]), float(query["end"]), float(query["step"])
        if (end - start) / step + 1 > 11_000:
            return (
                400,
                "application/json",
                json.dumps(
                    {
                        "status": "error",
                        "errorType": "bad_data",
                        "error": "exceeded maximum resolution of 11,000 points per timeseries. "
                        "Try decreasing the query resolution (?step=XX)",
                    }
                ),
            )
        metric = query["query"].split("{", 1)[0]
        result = []
        if metric in PROMETHEUS_VALUES:
            first = -(-int(start) // int(step)) * int(step)
            values = [
                [moment, PROMETHEUS_VALUES[metric]]
                for moment in range(first, int(end) + 1, int(step))
            ]
            result.append(
                {
                    "metric": {
                        "__name__": metric,
                        "UUID": uuid,
                        "gpu": "0",
                        "Hostname": host,
                        "modelName": "NVIDIA L4",
                        "instance": "10.0.0.9:9400",
                        "job": "dcgm",
                    },
                    "values": values,
                }
            )
        body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        return 200, "application/json", json.dumps(body)

    return route
