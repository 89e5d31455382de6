# OFFLINE STAND-IN for Hermes (offline.override.yaml): a client of the
# gateway that uses Hermes' env file as Hermes does (OPENAI_BASE_URL,
# OPENAI_API_KEY), asks it one chat completion, prints the answer, and
# stays up like `hermes gateway run`. Debian's python3 standard library
# only; the key is never printed.
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request

signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
BASE, KEY = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]


def chat(text):
    body = json.dumps({"model": "default", "messages": [{"role": "user", "content": text}]}).encode()
    req = urllib.request.Request(BASE + "/chat/completions", data=body,
                                 headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.load(r)["choices"][0]["message"]["content"]


while True:
    try:
        print("the gateway answered:", chat("hello from the offline client"), flush=True)
        break
    except urllib.error.HTTPError as e:
        print("the gateway refused:", e.code, flush=True)
    except OSError as e:
        print("the gateway is not answering yet:", type(e).__name__, flush=True)
    time.sleep(2)
while True:
    time.sleep(3600)
