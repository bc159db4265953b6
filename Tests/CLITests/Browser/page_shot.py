"""Opens a page in headless Chromium over the DevTools protocol, as a phone would show it,
saves a screenshot of the whole page to SHOT (PNG) and prints {"text": the page's text}.

usage: page_shot.py CHROMIUM URL SHOT
"""
import asyncio
import base64
import json
import sys

from devtools import chromium_page

chromium, url, shot = sys.argv[1:4]


async def main():
    async with chromium_page(chromium) as page:
        # A phone's width at twice its pixels: the store links the page from the app's listing.
        await page.call("Emulation.setDeviceMetricsOverride", width=412, height=915, deviceScaleFactor=2, mobile=True)
        await page.open(url)
        text = await page.text()
        image = await page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        with open(shot, "wb") as out:
            out.write(base64.b64decode(image["data"]))
        print(json.dumps({"text": text}))


asyncio.run(main())
