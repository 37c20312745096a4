"""Screenshots of the main pages, with Debian's chromium driven by Playwright (no browser download).

Run against a server that has data and a user who may see everything:

    .venv/bin/python -m curation.screenshots --url http://localhost:8000 --username curator --password ... [--out docs/screenshots]

Each page is saved in English (`dashboard.png`) and in Chinese beside it (`dashboard-zh.png`); the language is
chosen as a person chooses it, by the language cookie the header's switcher sets.

The README's screenshots are made by the browser test instead, on demo data it creates
(`KNOWHUB_SCREENSHOTS=docs/screenshots .venv/bin/python -m pytest tests/curation/test_browser.py -k screenshots`).
"""
import argparse
import os
from pathlib import Path

CHROMIUM = os.environ.get("KNOWHUB_CHROMIUM", "/usr/bin/chromium")
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def launch(playwright):
    """Headless Debian chromium; a clear error (never a silent skip) when it is missing."""
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see .ci/run)")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])


def log_in(page, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#main button[type=submit]")
    page.wait_for_url(f"{base_url}/")


# The languages screenshots are taken in, each with the suffix of its files ("" for English).
LANGUAGES = {"en": "", "zh-hans": "-zh"}
LANGUAGE_COOKIE = "django_language"  # Django's LANGUAGE_COOKIE_NAME (settings keep the default; this runs without them)


def use_language(page, base_url: str, language: str) -> None:
    """The page's later requests in `language`, as if chosen with the header's switcher (Django's language cookie)."""
    page.context.add_cookies([{"name": LANGUAGE_COOKIE, "value": language, "url": base_url}])


def capture(page, base_url: str, out: Path, pages: dict[str, str], *, suffix: str = "") -> list[Path]:
    """Save each `name -> path` page as out/name{suffix}.png (full page); waits for htmx to settle first."""
    out.mkdir(parents=True, exist_ok=True)
    saved = []
    for name, path in pages.items():
        page.goto(base_url + path)
        page.wait_for_load_state("networkidle")
        target = out / f"{name}{suffix}.png"
        page.screenshot(path=str(target), full_page=True)
        saved.append(target)
    return saved


MAIN_PAGES = {"dashboard": "/", "knowledge-list": "/knowledge/", "review": "/review/", "resources": "/resources/",
              "playground": "/playground/"}


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://localhost:8000")
    parser.add_argument("--username", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--out", default="docs/screenshots", type=Path)
    args = parser.parse_args()
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport=DESKTOP)
        log_in(page, args.url.rstrip("/"), args.username, args.password)
        for language, suffix in LANGUAGES.items():
            use_language(page, args.url.rstrip("/"), language)
            for path in capture(page, args.url.rstrip("/"), args.out, MAIN_PAGES, suffix=suffix):
                print(path)
        browser.close()


if __name__ == "__main__":
    main()
