"""Drives the operations page in headless Chromium over the DevTools protocol, as an
operator would with a keyboard: load it, retry a dead job, pause a kind, with a
screenshot after loading and after pausing (SHOTS-loaded.png, SHOTS-paused.png). Prints
one JSON object of the page's text at each step; exits non-zero if a step did not happen.

usage: drive.py CHROMIUM BASE_URL DEAD_JOB_ID KIND SHOTS
"""
import asyncio
import base64
import json
import sys

from devtools import chromium_page

chromium, base, job, kind, shots = sys.argv[1:6]


async def main():
    async with chromium_page(chromium) as page:
        async def press(label):
            # The keyboard's way: focus the button, then Enter.
            script = f"""
                (() => {{ const b = [...document.querySelectorAll('button')].find(b => b.textContent.trim() === {json.dumps(label)});
                          if (!b) return false; b.focus(); return document.activeElement === b; }})()"""
            if not await page.evaluate(script):
                sys.exit(f"no button '{label}' on the page")
            await page.enter()

        async def screenshot(name):
            shot = await page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
            with open(f"{shots}-{name}.png", "wb") as out:
                out.write(base64.b64decode(shot["data"]))

        # Twice the pixels of a laptop screen, so the text in the screenshots reads clearly.
        await page.call("Emulation.setDeviceMetricsOverride", width=1400, height=1000, deviceScaleFactor=2, mobile=False)
        await page.open(f"{base}/ops")
        loaded = await page.text()
        await screenshot("loaded")
        await press(f"Retry job #{job}")
        after_retry = await page.text()
        await press(f"Pause {kind}")
        after_pause = await page.text()
        await screenshot("paused")
        print(json.dumps({"loaded": loaded, "after_retry": after_retry, "after_pause": after_pause}))


asyncio.run(main())
