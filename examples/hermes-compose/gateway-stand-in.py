# OFFLINE STAND-IN for the LiteLLM gateway (offline.override.yaml): the
# two calls of OpenAI's API that Hermes and the health checks make, in
# OpenAI's format, answering only the key in LITELLM_MASTER_KEY, as
# LiteLLM's master key does. It calls no model: a chat completion says
# what it was asked. Debian's python3 standard library only.
import hmac
import http.server
import json
import os
import signal
import sys
import time

KEY = os.environ["LITELLM_MASTER_KEY"]
MODELS = {"object": "list", "data": [{"id": "default", "object": "model", "owned_by": "offline-stand-in"}]}


class Gateway(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self):
        got = self.headers.get("Authorization", "")
        if hmac.compare_digest(got.encode(), ("Bearer " + KEY).encode()):
            return True
        self.reply(401, {"error": {"message": "invalid API key", "type": "invalid_request_error", "code": "invalid_api_key"}})
        return False

    def do_GET(self):
        path = self.path.split("?")[0].rstrip("/")
        if path == "/health/liveliness":
            self.reply(200, "I'm alive!")
        elif path not in ("/v1/models", "/models"):
            self.reply(404, {"error": {"message": "not found: " + path}})
        elif self.authorized():
            self.reply(200, MODELS)

    def do_POST(self):
        path = self.path.split("?")[0].rstrip("/")
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self.reply(404, {"error": {"message": "not found: " + path}})
            return
        if not self.authorized():
            return
        try:
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            asked = [m.get("content", "") for m in req.get("messages", []) if m.get("role") == "user"]
        except (ValueError, AttributeError):
            self.reply(400, {"error": {"message": "the body is not a chat completion request"}})
            return
        answer = "offline stand-in: you said " + json.dumps(asked[-1] if asked else "")
        self.reply(200, {
            "id": "chatcmpl-offline", "object": "chat.completion", "created": int(time.time()),
            "model": req.get("model", "default"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        })


# PID 1 in its container: stop at once on docker stop.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print("offline gateway stand-in on :4000", flush=True)
http.server.ThreadingHTTPServer(("", 4000), Gateway).serve_forever()
