"""Every kind of admin page in a real browser (Playwright driving Debian's Chromium, headless):
nothing on it breaks the admin's Content-Security-Policy (moderation/admin/csp.py), and every
link reads at a contrast of at least 4.5:1 against what is behind it (WCAG 2.x, AA), in the
light theme and the dark one.

Skipped, saying why, only when no Chromium is installed (`.ci/run` installs it).
"""

from __future__ import annotations

from collections import Counter
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import Group

from moderation import services
from tests.browser.test_moderator_flow import CHROMIUM, PASSWORD, chromium, waiting
from tests.helpers import decided
from tests.moderation.test_admin_crawl import NEVER, combined, shape
from tests.moderation.test_admin_media import image_review

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]
# Listens before any script of the page runs: every violation the page causes is recorded.
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", event => window.__violations.push(
  `${event.effectiveDirective} blocked ${event.blockedURI || "(inline)"} at ${event.sourceFile}:${event.lineNumber}`));
"""
# Each text of each visible link: its colour, and the colour behind it (the nearest backgrounds
# up the tree, laid one over another until an opaque one; the canvas is white, or the theme's
# body colour); their WCAG contrast ratio. A text whose colours cannot be read is a failure too.
LINK_CONTRASTS = """
() => {
  const rgba = css => {
    const m = css.match(/^rgba?\\(([^)]*)\\)$/);
    if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3])).concat([1]);
  const behind = element => {
    const layers = [];
    for (let e = element; e; e = e.parentElement) {
      const colour = rgba(getComputedStyle(e).backgroundColor);
      if (colour === null) return null;
      if (colour[3] > 0) layers.push(colour);
      if (colour[3] >= 1) break;
    }
    return layers.reverse().reduce((under, top) => over(top, under), [255, 255, 255, 1]);
  };
  const luminance = c => c.slice(0, 3).map(v => {
    v /= 255;
    return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  }).reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  const ratio = (a, b) => {
    const [l1, l2] = [luminance(a), luminance(b)].sort((x, y) => y - x);
    return (l1 + 0.05) / (l2 + 0.05);
  };
  const visible = e => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden";
  const found = [];
  for (const link of document.querySelectorAll("a[href]")) {
    if (!visible(link)) continue;
    for (const e of [link, ...link.querySelectorAll("*")]) {
      const own = [...e.childNodes].filter(n => n.nodeType === Node.TEXT_NODE).map(n => n.textContent).join("").trim();
      if (!own || !visible(e)) continue;
      const text = rgba(getComputedStyle(e).color), back = behind(e);
      const colours = text && back ? [text[3] < 1 ? over(text, back) : text, back] : null;
      found.push({text: own.slice(0, 60), href: link.getAttribute("href"), colour: getComputedStyle(e).color,
                  background: back ? `rgb(${back.slice(0, 3).map(Math.round).join(", ")})` : "unreadable",
                  ratio: colours ? ratio(...colours) : 0});
    }
  }
  return found;
}
"""
MIN_CONTRAST = 4.5
PAGES_PER_SHAPE = 1
MAX_PAGES = 80


@pytest.fixture
def workplace(api_client, django_user_model, settings):
    """A superuser (every page and link is theirs) and a review of each kind: waiting, reported,
    an image (the local provider judges no image: it waits in the Images queue), decided."""
    settings.MODERATION_PROVIDER = "local"
    unsure = waiting(api_client, "Great job breaking the build again, genius.", {"harassment": 0.53})
    reported = decided(api_client, "approved")
    services.report_file(review_id=reported.pk, reporter_id="u-101", reason="spam", detail="a reported post")
    image = image_review(api_client, 1)
    decided(api_client, "rejected")
    user = django_user_model.objects.create_superuser("root", password=PASSWORD)
    user.groups.add(Group.objects.get(name="moderator"))
    return {"unsure": unsure, "reported": reported, "image": image}


def opened(browser, live_server, *, color_scheme: str = "light"):
    """A logged-in superuser's page, recording CSP violations and the console's CSP messages."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, color_scheme=color_scheme)
    context.add_init_script(RECORD_VIOLATIONS)
    page = context.new_page()
    console = []
    page.on("console", lambda message: console.append(message.text)
            if "Content Security Policy" in message.text else None)
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "root")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#dashboard")
    return page, console


def admin_links(page) -> list[str]:
    hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
    paths = []
    for href in hrefs:
        parts = urlsplit(href)
        if parts.path.startswith("/admin/") and not NEVER.search(parts.path) and "/media/" not in parts.path:
            paths.append(parts.path + (f"?{parts.query}" if parts.query else ""))
    return paths


def test_no_admin_page_breaks_its_content_security_policy(live_server, workplace):
    unsure, image = workplace["unsure"], workplace["image"]
    start = ["/admin/", "/admin/moderation/contentreview/queues/", "/admin/moderation/contentreview/",
             f"/admin/moderation/contentreview/{unsure.pk}/timeline/",
             f"/admin/moderation/contentreview/{image.pk}/timeline/",  # the media viewer: our copy, its script
             "/admin/moderation/moderationpolicy/terms/", "/admin/moderation/moderationpolicy/notices/",
             "/admin/auth/user/add/", "/admin/moderation/decision/transparency-report/"]
    problems, headers, seen, per_shape = [], {}, [], Counter()

    with chromium() as browser:
        page, console = opened(browser, live_server)
        queue = list(start)
        while queue and len(seen) < MAX_PAGES:
            url = queue.pop(0)
            if url in seen or (url not in start and (combined(url) or per_shape[shape(url)] >= PAGES_PER_SHAPE)):
                continue
            seen.append(url)
            per_shape[shape(url)] += 1
            response = page.goto(live_server.url + url)
            page.wait_for_load_state("load")
            headers[url] = response.headers.get("content-security-policy", "")
            problems += [f"{url}: {v}" for v in page.evaluate("window.__violations")]
            queue += admin_links(page)
        # The term editor's preview and dry run, submitted by the browser: a form posted and its answer.
        page.goto(live_server.url + "/admin/moderation/moderationpolicy/terms/")
        page.fill("#id_category", "harassment")
        page.fill("textarea[name=terms]", "genius")
        page.fill("textarea[name=dry_texts]", "Great job breaking the build again, genius.")
        page.click("#preview")
        page.wait_for_load_state("load")
        preview = page.content()
        problems += [f"term preview: {v}" for v in page.evaluate("window.__violations")]
        # The listener hears a violation when there is one: an injected inline script is refused.
        page.evaluate("""() => { const s = document.createElement("script");
                                 s.textContent = "window.__ran = true"; document.body.append(s); }""")
        page.wait_for_function("window.__violations.length > 0")
        injected, ran = page.evaluate("window.__violations"), page.evaluate("window.__ran === true")
        # Logged out: the login page.
        page.context.clear_cookies()
        response = page.goto(live_server.url + "/admin/login/")
        headers["/admin/login/"] = response.headers.get("content-security-policy", "")
        problems += [f"login: {v}" for v in page.evaluate("window.__violations")]

    assert not problems, "\n".join(problems)
    assert len(console) == 1 and "script-src" in console[0]  # only the injected script's refusal
    assert "Dry run" in preview
    assert not ran and injected and injected[0].startswith("script-src")
    assert all("default-src 'self'" in csp and "frame-ancestors 'none'" in csp for csp in headers.values()), headers
    assert "nonce-" in headers[f"/admin/moderation/contentreview/{unsure.pk}/timeline/"]
    paths = {urlsplit(url).path for url in seen}
    # The crawl reached every kind of page: the lists, a change form, a history, the workplace.
    assert {"/admin/moderation/contentreview/", "/admin/moderation/reporter/", "/admin/moderation/author/",
            "/admin/moderation/hashbank/", "/admin/moderation/transparencystatement/",
            "/admin/moderation/moderationpolicy/", "/admin/audit/reviewtransition/"} <= paths, sorted(paths)
    assert any(p.endswith("/change/") for p in paths) and any(p.endswith("/history/") for p in paths), sorted(paths)


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
def test_every_link_on_the_workplace_pages_reads_at_4_5_to_1(live_server, workplace, color_scheme):
    unsure = workplace["unsure"]
    pages = ["/admin/", "/admin/moderation/contentreview/queues/", "/admin/moderation/contentreview/queues/?queue=reports",
             "/admin/moderation/contentreview/", f"/admin/moderation/contentreview/{unsure.pk}/timeline/"]
    failing, checked = [], Counter()

    with chromium() as browser:
        page, _ = opened(browser, live_server, color_scheme=color_scheme)
        theme = page.evaluate("getComputedStyle(document.body).backgroundColor")
        for url in pages:
            page.goto(live_server.url + url)
            page.wait_for_load_state("load")
            for link in page.evaluate(LINK_CONTRASTS):
                checked[url] += 1
                if link["ratio"] < MIN_CONTRAST:
                    failing.append(f"{url}: {link['text']!r} ({link['href']}) {link['colour']} on "
                                   f"{link['background']}: {link['ratio']:.2f}:1")

    assert not failing, "\n".join(failing)
    assert theme == ("rgb(18, 18, 18)" if color_scheme == "dark" else "rgb(255, 255, 255)")  # the theme applied
    assert all(checked[url] >= 3 for url in pages), checked
