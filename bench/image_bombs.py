"""Image bombs against another client's text submissions (issue 45; docs/benchmarks.md, "Image
bombs").

    python -m bench.image_bombs [--texts 300] [--at-once 4] [--server granian] [--now | --code DIR]

The platform as `run_platform` starts it (granian serving config.asgi unless `--server` says
otherwise, the moderation cluster with the local model, the notification cluster), production
settings (the per-client rate limit as shipped, THROTTLE_CLIENT_RATE 1200/min, shared by the web
workers since issue 45; per web worker before), a database of its own. One client submits texts one after another, each timed from
the request sent to the answer read, ten a second at most; another submits images, `--at-once` at a time without
pause, for as long as the text client runs. Four phases:

- **baseline**: the texts alone;
- **refused flood (control)**: the same senders, each sending 16 bytes that are no image (a 400
  at once, like a bomb's, with no image work): what a flood of refused requests at that rate
  costs the other client by itself, whatever it carries;
- **bombs**: the issue's bomb, a 154 KB PNG declaring 6300 x 6300 RGBA (39.7 megapixels, under
  MEDIA_MAX_PIXELS; about 260 pixels a byte);
- **heaviest accepted**: a flat 3100 x 3100 RGB PNG (9.6 megapixels in ~30 KB, under
  MEDIA_RATIO_FROM_PIXELS, so taken however well it compresses): what the bounds let through at
  the least cost to the sender, decoded by the job.

After each phase the images stop and the run waits (at most `--drain-s`) until every review is
final, so the next phase starts on an idle platform; how long that took is printed. For each
phase: the texts' p50 and p95, p95 against the baseline's (goal: at most 2) and against the
control's (what the images themselves add to the flood), what the images were answered, and the peak RSS of one web worker and one q2 worker. Figures are printed;
nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import base64
import io
import multiprocessing
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from bench import checkout, common
from bench.submit import TEXTS

WARM_TEXTS = 20
THROTTLE_CLIENT_RATE = "1200/min"  # config/settings.py's default
TEXT_EVERY_S = 0.1  # the text client's pace: 600 a minute, under its own rate limit


def bomb_png() -> bytes:
    """The issue's bomb: 6300 x 6300 transparent RGBA, 154 KB of PNG."""
    return _flat_png("RGBA", 6300)


def heaviest_accepted_png() -> bytes:
    """A flat 3100 x 3100 RGB PNG: under MEDIA_RATIO_FROM_PIXELS' default, taken at any size."""
    return _flat_png("RGB", 3100)


def _flat_png(mode: str, side: int) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new(mode, (side, side)).save(buffer, "PNG", optimize=True)
    return buffer.getvalue()


@dataclass
class Phase:
    name: str
    latencies_ms: list[float] = field(default_factory=list)
    text_errors: Counter = field(default_factory=Counter)
    images: Counter = field(default_factory=Counter)  # what the images were answered: status or error
    drain_s: float = 0.0
    unfinished: int = 0
    rss: dict = field(default_factory=dict)

    def p(self, q: float) -> float:
        return common.percentile(self.latencies_ms, q)


def texts(base: str, token: str, count: int, *, tag: str, phase: Phase, every_s: float = TEXT_EVERY_S) -> None:
    """`count` text submissions, one after another and one every `every_s` at most (under the
    client's rate limit), each timed (ms) into `phase`."""
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        started = time.perf_counter() - every_s
        for n in range(count):
            body = {"external_id": f"{tag}-{n}", "content_type": "text", "text": TEXTS[n % len(TEXTS)]}
            time.sleep(max(0.0, every_s - (time.perf_counter() - started)))
            started = time.perf_counter()
            try:
                response = client.post("/api/v1/reviews/", json=body)
            except httpx.HTTPError as exc:
                phase.text_errors[type(exc).__name__] += 1
                continue
            phase.latencies_ms.append((time.perf_counter() - started) * 1000)
            if response.status_code != 201:
                phase.text_errors[str(response.status_code)] += 1


def images(base: str, token: str, image: bytes, *, at_once: int, tag: str, stop, answered) -> None:
    """`at_once` senders of `image`, each sending it again as soon as it is answered, until `stop`
    (an Event); then what they were answered (a Counter) is put on `answered` (a Queue). Run in
    a process of its own: the senders' Python never competes with the timed client's."""
    # The body is built once: the sender's own work must not be what slows the machine (only the
    # external id changes, appended last).
    head = b'{"content_type": "image", "image_base64": "' + base64.b64encode(image) + b'", "external_id": "'
    lock, outcomes = threading.Lock(), Counter()

    def send(sender: int) -> None:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=120) as client:
            n = 0
            while not stop.is_set():
                body = head + f'{tag}-{sender}-{n}"}}'.encode()
                try:
                    outcome = str(client.post("/api/v1/reviews/", content=body,
                                              headers={"Content-Type": "application/json"}).status_code)
                except httpx.HTTPError as exc:
                    outcome = type(exc).__name__
                with lock:
                    outcomes[outcome] += 1
                n += 1

    senders = [threading.Thread(target=send, args=(i,)) for i in range(at_once)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    answered.put(outcomes)


def measure(base: str, tokens: tuple[str, str], phase: Phase, *, count: int, image: bytes | None, at_once: int,
            tag: str) -> Phase:
    """One phase: `count` timed texts, while `image` arrives `at_once` at a time (None: alone)."""
    text_token, image_token = tokens
    if image is None:
        texts(base, text_token, count, tag=f"{tag}-text", phase=phase)
        return phase
    fork = multiprocessing.get_context("fork")
    stop, answered = fork.Event(), fork.Queue()
    sender = fork.Process(target=images, args=(base, image_token, image),
                          kwargs={"at_once": at_once, "tag": f"{tag}-img", "stop": stop, "answered": answered})
    sender.start()
    try:
        texts(base, text_token, count, tag=f"{tag}-text", phase=phase)
    finally:
        stop.set()
        phase.images.update(answered.get(timeout=300))
        sender.join()
    return phase


def drain(url: str, phase: Phase, timeout_s: float) -> None:
    """Wait until every review is final (at most `timeout_s`): the next phase starts idle."""
    began = time.monotonic()
    while True:
        left = checkout.query(url, "SELECT count(*) FROM moderation_contentreview WHERE NOT status = ANY(%s)",
                              [list(common.FINAL)])[0][0]
        if not left or time.monotonic() - began > timeout_s:
            phase.drain_s, phase.unfinished = time.monotonic() - began, left
            return
        time.sleep(0.5)


def run(code: checkout.Checkout, *, count: int, at_once: int, web_workers: int, q_workers: int, server: str,
        drain_s: float) -> list[Phase]:
    url = code.database("image_bombs")
    tokens = (code.create_client(url, "bench-texts")[1], code.create_client(url, "bench-images")[1])
    # The per-client rate limit as shipped (the other benchmarks lift it): it is part of what
    # keeps one client's flood from another's answers.
    env = {"DATABASE_URL": url, "MODERATION_PROVIDER": "local", "THROTTLE_CLIENT_RATE": THROTTLE_CLIENT_RATE}
    plan = [("baseline", None), ("refused flood", b"no image here!!!"), ("bombs", bomb_png()),
            ("heaviest accepted", heaviest_accepted_png())]
    phases = []
    with common.Platform(web_workers=web_workers, clusters=1, q_workers=q_workers, env=env, code=code.path, python=code.executable,
                         server=server) as platform:
        base = f"http://127.0.0.1:{platform.port}"
        texts(base, tokens[0], WARM_TEXTS * web_workers, tag="warm", phase=Phase("warm"))
        drain(url, Phase("warm"), drain_s)
        platform.sample_rss()
        for name, image in plan:
            platform.peak_rss = {}
            # A fresh image client each phase: one phase's flood must not spend the next one's rate
            # limit (its images would then all be answered 429, never reaching the image checks).
            images_token = code.create_client(url, f"bench-images-{name.replace(' ', '-')}")[1]
            phase = measure(base, (tokens[0], images_token), Phase(name), count=count, image=image,
                            at_once=at_once, tag=name.replace(" ", "-"))
            drain(url, phase, drain_s)
            phase.rss = dict(platform.peak_rss)
            phases.append(phase)
            print(describe(code, phase, phases[0], control=phases[1] if len(phases) > 2 else None), flush=True)
    return phases


def describe(code: checkout.Checkout, phase: Phase, baseline: Phase, *, control: Phase | None = None) -> str:
    answered = ", ".join(f"{outcome} x{n}" for outcome, n in sorted(phase.images.items())) or "-"
    errors = ", ".join(f"{outcome} x{n}" for outcome, n in sorted(phase.text_errors.items())) or "none"
    return (f"{code.label} ({code.commit}) {phase.name:<18} texts p50 {phase.p(50):7.1f} ms, p95 {phase.p(95):7.1f} ms "
            f"(p95 / baseline p95 {common.ratio(phase.p(95), baseline.p(95))}; goal <= 2"
            + (f"; / control p95 {common.ratio(phase.p(95), control.p(95))}" if control else "")
            + f"), {len(phase.latencies_ms)} "
            f"texts, errors {errors}; images answered: {answered}; drained in {phase.drain_s:.1f} s "
            f"({phase.unfinished} not final); peak RSS {common.rss_line(phase.rss)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=300, help="timed text submissions per phase")
    parser.add_argument("--at-once", type=int, default=4, help="images in flight at once")
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--q-workers", type=int, default=2)
    parser.add_argument("--server", choices=sorted(common.SERVERS), default="granian",
                        help="the web server: granian (make run's), gunicorn sync workers or gthread")
    parser.add_argument("--drain-s", type=float, default=180, help="the longest wait for a phase's reviews")
    checkout.add_arguments(parser)
    args = parser.parse_args()
    common.setup_driver()
    print(f"Image bombs: {args.texts} texts a phase, one at a time, while images arrive {args.at_once} at a time; "
          f"{args.web_workers} {args.server} workers, {args.q_workers} q2 workers with the local model; "
          f"{os.cpu_count()} CPUs", flush=True)
    for code in checkout.chosen(args):
        run(code, count=args.texts, at_once=args.at_once, web_workers=args.web_workers, q_workers=args.q_workers,
            server=args.server, drain_s=args.drain_s)


if __name__ == "__main__":
    main()
