"""Drives the operations page in headless Chromium over the DevTools protocol, as an
operator would with a keyboard: load it, retry a dead job, pause a kind, with a
screenshot after loading and after pausing (SHOTS-loaded.png, SHOTS-paused.png). Prints
one JSON object of the page's text at each step; exits non-zero if a step did not happen.

usage: drive.py CHROMIUM BASE_URL DEAD_JOB_ID KIND SHOTS
"""
import asyncio
import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import urllib.request

import websockets

chromium, base, job, kind, shots = sys.argv[1:6]


async def main():
    profile = tempfile.mkdtemp(prefix="ops-chromium-")
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
        page = next(t for t in targets if t["type"] == "page")
        async with websockets.connect(page["webSocketDebuggerUrl"], max_size=64 * 1024 * 1024) as socket:
            ids = iter(range(1, 1_000_000))
            pending_events = []

            async def call(method, **params):
                number = next(ids)
                await socket.send(json.dumps({"id": number, "method": method, "params": params}))
                while True:
                    message = json.loads(await socket.recv())
                    if message.get("id") == number:
                        if "error" in message:
                            sys.exit(f"{method}: {message['error']}")
                        return message.get("result", {})
                    pending_events.append(message)

            async def wait_for_load():
                while True:
                    for event in pending_events:
                        if event.get("method") == "Page.loadEventFired":
                            pending_events.clear()
                            return
                    pending_events.clear()
                    pending_events.append(json.loads(await socket.recv()))

            async def text():
                result = await call("Runtime.evaluate", expression="document.body.innerText", returnByValue=True)
                return result["result"]["value"]

            async def press(label):
                # The keyboard's way: focus the button, then Enter.
                script = f"""
                    (() => {{ const b = [...document.querySelectorAll('button')].find(b => b.textContent.trim() === {json.dumps(label)});
                              if (!b) return false; b.focus(); return document.activeElement === b; }})()"""
                focused = (await call("Runtime.evaluate", expression=script, returnByValue=True))["result"]["value"]
                if not focused:
                    sys.exit(f"no button '{label}' on the page")
                for kind_ in ("keyDown", "keyUp"):
                    await call("Input.dispatchKeyEvent", type=kind_, key="Enter", code="Enter", windowsVirtualKeyCode=13,
                               **({"text": "\r"} if kind_ == "keyDown" else {}))
                await wait_for_load()

            async def screenshot(name):
                shot = await call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
                with open(f"{shots}-{name}.png", "wb") as out:
                    out.write(base64.b64decode(shot["data"]))

            # Twice the pixels of a laptop screen, so the text in the screenshots reads clearly.
            await call("Emulation.setDeviceMetricsOverride", width=1400, height=1000, deviceScaleFactor=2, mobile=False)
            await call("Page.enable")
            await call("Page.navigate", url=f"{base}/ops")
            await wait_for_load()
            loaded = await text()
            await screenshot("loaded")
            await press(f"Retry job #{job}")
            after_retry = await text()
            await press(f"Pause {kind}")
            after_pause = await text()
            await screenshot("paused")
            print(json.dumps({"loaded": loaded, "after_retry": after_retry, "after_pause": after_pause}))
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            browser.kill()


asyncio.run(main())
