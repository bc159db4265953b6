"""Drives the account deletion page in headless Chromium over the DevTools protocol with
the keyboard only, as a user with no mouse would:

  ask URL ADDRESS  opens URL (/account/delete), types ADDRESS into the focused field, Tab,
                   Enter; prints {"focus_after_load", "focus_after_tab", "text"}
  confirm URL      opens URL (the emailed link), Tab, Enter; prints {"before",
                   "focus_after_load", "focus_after_tab", "text"}
  part URL LABEL   opens URL (the emailed link), Tabs to the checkbox whose label starts
                   with LABEL, Space, Tabs to "Delete only what I ticked", Enter; prints
                   {"before", "stops", "ticked", "text"} (stops: what each Tab reached)

Exits non-zero if a step did not happen.

usage: delete_account.py CHROMIUM ask|confirm|part URL [ADDRESS|LABEL]
"""
import asyncio
import json
import sys

from devtools import chromium_page

chromium, phase, url = sys.argv[1:4]
address = sys.argv[4] if len(sys.argv) > 4 else ""

# What the keyboard is on: a field by its label, a button or link by its text.
FOCUSED = """(() => { const e = document.activeElement; if (!e || e === document.body) return 'nothing';
    if (e.labels && e.labels.length) return e.tagName.toLowerCase() + ': ' + e.labels[0].textContent.trim();
    return e.tagName.toLowerCase() + ': ' + e.textContent.trim(); })()"""


async def tab_to(page, wanted, stops):
    """Tab until the focus is on `wanted` (a prefix of FOCUSED's words); at most 12 Tabs."""
    for _ in range(12):
        await page.key("Tab", "Tab", 9)
        stops.append(await page.evaluate(FOCUSED))
        if stops[-1].startswith(wanted):
            return
    sys.exit(f"Tab never reached {wanted!r}: {stops}")


async def part(url, label):
    async with chromium_page(chromium) as page:
        await page.open(url)
        seen = {"before": await page.text(), "stops": []}
        await tab_to(page, "input: " + label, seen["stops"])
        await page.key(" ", "Space", 32, " ")
        seen["ticked"] = await page.evaluate("document.activeElement.checked")
        await tab_to(page, "button: Delete only what I ticked", seen["stops"])
        await page.enter()
        seen["text"] = await page.text()
        print(json.dumps(seen))


async def main():
    if phase == "part":
        return await part(url, address)
    if phase not in ("ask", "confirm"):
        sys.exit(f"unknown phase {phase}")
    async with chromium_page(chromium) as page:
        await page.open(url)
        seen = {"before": await page.text(), "focus_after_load": await page.evaluate(FOCUSED)}
        if phase == "ask":
            await page.type_text(address)
        await page.key("Tab", "Tab", 9)
        seen["focus_after_tab"] = await page.evaluate(FOCUSED)
        await page.enter()
        seen["text"] = await page.text()
        print(json.dumps(seen))


asyncio.run(main())
