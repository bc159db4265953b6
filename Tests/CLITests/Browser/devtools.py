"""Headless Chromium driven over the DevTools protocol, for the page tests (drive.py,
delete_account.py): start it, open one page's socket, call methods, wait for loads, read
the page, and type as a keyboard does."""
import contextlib
import json
import re
import subprocess
import sys
import tempfile
import threading
import urllib.request

import websockets


class Page:
    def __init__(self, socket):
        self.socket = socket
        self.ids = iter(range(1, 1_000_000))
        self.pending_events = []

    async def call(self, method, **params):
        number = next(self.ids)
        await self.socket.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads(await self.socket.recv())
            if message.get("id") == number:
                if "error" in message:
                    sys.exit(f"{method}: {message['error']}")
                return message.get("result", {})
            self.pending_events.append(message)

    async def wait_for_load(self):
        while True:
            for event in self.pending_events:
                if event.get("method") == "Page.loadEventFired":
                    self.pending_events.clear()
                    return
            self.pending_events.clear()
            self.pending_events.append(json.loads(await self.socket.recv()))

    async def open(self, url):
        await self.call("Page.enable")
        await self.call("Page.navigate", url=url)
        await self.wait_for_load()

    async def evaluate(self, expression):
        return (await self.call("Runtime.evaluate", expression=expression, returnByValue=True))["result"].get("value")

    async def text(self):
        return await self.evaluate("document.body.innerText")

    async def key(self, name, code, virtual, text=None):
        await self.call("Input.dispatchKeyEvent", type="keyDown", key=name, code=code, windowsVirtualKeyCode=virtual,
                        **({"text": text} if text else {}))
        await self.call("Input.dispatchKeyEvent", type="keyUp", key=name, code=code, windowsVirtualKeyCode=virtual)

    async def enter(self):
        """Enter on what has the focus, then the page it loads."""
        await self.key("Enter", "Enter", 13, "\r")
        await self.wait_for_load()

    async def type_text(self, text):
        for character in text:
            await self.call("Input.dispatchKeyEvent", type="char", text=character, key=character, unmodifiedText=character)


@contextlib.asynccontextmanager
async def chromium_page(chromium):
    """A fresh headless Chromium (its own profile) and its first page; stopped on exit."""
    profile = tempfile.mkdtemp(prefix="page-chromium-")
    browser = subprocess.Popen(
        [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        endpoint = None
        for line in browser.stderr:
            match = re.search(r"DevTools listening on (ws://\S+)", line)
            if match:
                endpoint = match.group(1)
                break
        if endpoint is None:
            sys.exit("chromium did not start its DevTools endpoint")
        # Keep reading what it says, so a full pipe never stalls it.
        threading.Thread(target=lambda: [None for _ in browser.stderr], daemon=True).start()
        port = re.search(r":(\d+)/", endpoint).group(1)
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
        target = next(t for t in targets if t["type"] == "page")
        async with websockets.connect(target["webSocketDebuggerUrl"], max_size=64 * 1024 * 1024) as socket:
            yield Page(socket)
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            browser.kill()
