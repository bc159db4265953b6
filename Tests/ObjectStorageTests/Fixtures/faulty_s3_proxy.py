#!/usr/bin/env python3
"""A loopback proxy in front of a real moto_server that misbehaves the way S3 does
under load, on cue, so the S3 store's retries can be tested against real answers.

    faulty_s3_proxy.py UPSTREAM_PORT RULE...

A rule is FAULT:METHOD:QUERY:COUNT, applied to the first COUNT requests whose method
is METHOD and whose query string contains QUERY (empty: any):
    503  answer 503 SlowDown without forwarding
    500  answer 500 InternalError without forwarding
    keyerror  (DeleteObjects only) forward without the first key and report that key
              as an InternalError in the answer, as S3 does for a key it failed to delete
GET /__proxy/stats answers, as JSON, how many requests each rule hit and how many
requests were forwarded. The proxy listens on a loopback port the kernel picks, and
prints "ready PORT" once it does: a port chosen by the test and bound later could be
taken in between by any of the suite's other servers or connections.
"""
import base64
import hashlib
import http.client
import json
import os
import re
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

upstream_port = int(sys.argv[1])
rules = []
for text in sys.argv[2:]:
    fault, method, query, count = text.split(":", 3)
    rules.append({"fault": fault, "method": method, "query": query, "left": int(count), "hit": 0})
lock = threading.Lock()
forwarded = {"count": 0}

ERROR_BODY = ('<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
              '<Message>injected by the test proxy</Message></Error>')
# Expect is answered here (100 Continue) and must not be passed on: the body follows at once.
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection", "expect"}


def matching_rule(method, query):
    with lock:
        for rule in rules:
            if rule["left"] > 0 and rule["method"] == method and rule["query"] in query:
                rule["left"] -= 1
                rule["hit"] += 1
                return rule["fault"]
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path == "/__proxy/stats":
            with lock:
                stats = {"rules": [{k: r[k] for k in ("fault", "method", "query", "hit")} for r in rules],
                         "forwarded": forwarded["count"]}
            return self.answer(200, json.dumps(stats).encode(), [("Content-Type", "application/json")])
        query = urlsplit(self.path).query
        fault = matching_rule(self.command, query)
        if fault in ("503", "500"):
            code = "SlowDown" if fault == "503" else "InternalError"
            return self.answer(int(fault), ERROR_BODY.format(code=code).encode(), [("Content-Type", "application/xml")])
        headers = {name: value for name, value in self.headers.items() if name.lower() not in HOP_BY_HOP}
        withheld = None
        if fault == "keyerror":
            keys = re.findall(rb"<Object><Key>(.*?)</Key></Object>", body)
            if keys:
                withheld = keys[0]
                body = body.replace(b"<Object><Key>" + withheld + b"</Key></Object>", b"", 1)
                headers["Content-MD5"] = base64.b64encode(hashlib.md5(body).digest()).decode()
        headers["Content-Length"] = str(len(body))
        connection = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
        connection.request(self.command, self.path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        connection.close()
        with lock:
            forwarded["count"] += 1
        if withheld is not None:
            error = (b"<Error><Key>" + withheld + b"</Key><Code>InternalError</Code>"
                     b"<Message>injected by the test proxy</Message></Error>")
            data = re.sub(rb"(</DeleteResult>)", error + rb"\1", data, count=1) if b"</DeleteResult>" in data else \
                re.sub(rb"<DeleteResult([^>]*)/>", rb"<DeleteResult\1>" + error + rb"</DeleteResult>", data, count=1)
        relayed = [(name, value) for name, value in response.getheaders()
                   if name.lower() not in HOP_BY_HOP and name.lower() != "content-length"]
        self.answer(response.status, data, relayed)

    do_GET = do_PUT = do_POST = do_DELETE = handle_any

    def do_HEAD(self):
        # A HEAD answer carries the headers of a GET and no body.
        headers = {name: value for name, value in self.headers.items() if name.lower() not in HOP_BY_HOP}
        fault = matching_rule("HEAD", urlsplit(self.path).query)
        if fault in ("503", "500"):
            self.send_response(int(fault))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        connection = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
        connection.request("HEAD", self.path, headers=headers)
        response = connection.getresponse()
        response.read()
        connection.close()
        with lock:
            forwarded["count"] += 1
        self.send_response(response.status)
        for name, value in response.getheaders():
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        self.end_headers()


# The test process blocks SIGTERM and children inherit that: unblock it so `terminate()` works.
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
parent = os.getppid()


def exit_with_parent():
    # A test process killed outright cannot stop this one: follow it instead.
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(0)


threading.Thread(target=exit_with_parent, daemon=True).start()
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print("ready", server.server_address[1], flush=True)
server.serve_forever()
