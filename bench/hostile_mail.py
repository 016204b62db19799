"""Hostile mail against a running ``supportrag serve``: what each message became, and how long the webhook took.

Run by hand against a throwaway server started with INBOUND_EMAIL_SECRET set, e.g.::

    SUPPORTRAG_DATA_DIR=/tmp/smoke PORT=5077 INBOUND_EMAIL_SECRET=s3cret supportrag serve &
    python bench/hostile_mail.py --base http://127.0.0.1:5077 --secret s3cret

Sends: a customer's ticket, a 1 MiB body of adversarial "On a a a …" lines, an unknown charset, a spoofed reply
into the first customer's thread, an attachment-only message, a message without a Message-ID twice (a replay),
then the old body-only signature and a stale timestamp (both must be 401). Then issue 32's cases: HTML bodies of
``<`` and ``<a`` (256 KiB and 1 MiB), 600 nested ``(`` in From, five ambiguous From headers into Bob's thread, two
[T-n] tags, an internationalised sender, eight kinds of automatic mail, text / image / text, a forwarded
message/rfc822 and an inline forwarded invoice, a 3 MB photo, 600 attachments, a bidi file name and an encoded
CR LF in the subject, 2,000 encoded words in a subject, a header folded over 10,000 lines and 5,000 Received
headers. Prints one line per message: (HTTP status, outcome, seconds).

``--smtp-port N`` checks only the signed-link trust instead: serve started with ``SMTP_HOST=127.0.0.1 SMTP_PORT=N
SMTP_TLS=none MAIL_FROM=support@example.com``, this script listens there, posts an API ticket for a new address (its
acknowledgement must not quote it), opens the e-mailed signed link, posts again (now it may).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request
from email.message import EmailMessage

from service.intake.signature import sign

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--base", default="http://127.0.0.1:5077")
parser.add_argument("--secret", default="s3cret")
parser.add_argument("--parsers", action="store_true", help="time the parsers on 1 MiB inputs (no server), then exit")
parser.add_argument("--smtp-port", type=int, help="only check the signed-link trust of acknowledgements: listen as "
                    "serve's SMTP server (SMTP_HOST=127.0.0.1 SMTP_PORT=this SMTP_TLS=none), then exit")
ARGS = parser.parse_args()
BASE = ARGS.base.rstrip("/") + "/api/inbound/email"


def time_parsers() -> None:
    """Best of three for each parser and cut on an adversarial 1 MiB input, as a Markdown table."""
    from service.intake.html_text import html_to_text
    from service.intake.quoted import strip_quoted
    from service.intake.senders import strict_mailbox
    from service.mail.compose import header_safe

    mib = 1024 * 1024
    cases = [(html_to_text, "<" * mib, "`<` x 1 MiB"), (html_to_text, "<a" * (mib // 2), "`<a` x 512 Ki"),
             (html_to_text, "<!--" * (mib // 4), "`<!--` x 256 Ki"), (html_to_text, "<a b='" * (mib // 6), "`<a b='`"),
             (strip_quoted, "On " + "a " * (mib // 2), "`On a a a`, 1 MiB"),
             (lambda v: strict_mailbox([v]), "(" * mib, "`(` x 1 MiB"),
             (header_safe, "=?utf-8?q?a=0D=0A?=" * (mib // 19), "encoded CR LF words, 1 MiB")]
    for function, value, label in cases:
        best = min(_seconds(function, value) for _ in range(3))
        print(f"| `{label_of(function)}` | {label} | {best:.2f} s |")


def label_of(function) -> str:
    """The function's name (the lambda around strict_mailbox is named for it)."""
    return "strict_mailbox" if function.__name__ == "<lambda>" else function.__name__


def _seconds(function, value) -> float:
    started = time.perf_counter()
    function(value)
    return time.perf_counter() - started


if ARGS.parsers:
    time_parsers()
    raise SystemExit(0)


def post_ticket(subject: str, email: str) -> int:
    """An anonymous API ticket handed to an agent (nothing in the seed articles answers it): its id."""
    data = json.dumps({"subject": subject, "body": "Do you ship parrot food to Mars?", "email": email}).encode()
    req = urllib.request.Request(ARGS.base.rstrip("/") + "/api/tickets", data=data,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())["ticket"]["id"]


def acknowledgement(inbox: list, ticket_id: int, timeout: float = 90.0):
    """The acknowledgement of ``ticket_id`` once serve's mail worker delivered it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [m for m in inbox if f"T-{ticket_id}" in str(m["Subject"])]
        if found:
            return found[0]
        time.sleep(0.2)
    raise SystemExit(f"no acknowledgement of T-{ticket_id} in {timeout:.0f} s: is serve's SMTP_PORT {ARGS.smtp_port}?")


def check_signed_link_trust(port: int) -> None:
    """An address that never wrote gets the no-echo acknowledgement; once it opens the signed link, its next
    acknowledgement may quote its subject. Prints one line per step."""
    from email import message_from_bytes, policy  # only this mode needs an SMTP server: imported here
    from urllib.parse import urlsplit

    from aiosmtpd.controller import Controller

    inbox: list = []

    class Keep:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's hook name)
            inbox.append(message_from_bytes(envelope.original_content, policy=policy.default))
            return "250 OK"

    controller = Controller(Keep(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        address = f"trust-{int(time.time())}@customer.test"
        first = acknowledgement(inbox, post_ticket("Parrot food to Mars", address))
        print(f"never wrote: subject {str(first['Subject'])!r}, quotes 'Parrot': "
              f"{'Parrot' in str(first['Subject']) + first.get_body().get_content()}")
        link = next(w for w in first.get_body().get_content().split() if "link=" in w)
        parts = urlsplit(link)
        with urllib.request.urlopen(f"{ARGS.base.rstrip('/')}{parts.path}?{parts.query}", timeout=60) as r:
            print(f"signed link opened: {r.status}")
        second = acknowledgement(inbox, post_ticket("Parrot seeds to Venus", address))
        print(f"after the link: subject {str(second['Subject'])!r}, quotes 'Parrot': "
              f"{'Parrot' in str(second['Subject']) + second.get_body().get_content()}")
    finally:
        controller.stop()


if ARGS.smtp_port:
    check_signed_link_trust(ARGS.smtp_port)
    raise SystemExit(0)

def post(raw: bytes, signature: str | None = None) -> tuple:
    """POST one raw message signed now (or with ``signature``): (status, JSON, seconds)."""
    sig = signature or sign(ARGS.secret, raw, int(time.time()))
    req = urllib.request.Request(BASE, data=raw, headers={"X-Signature": sig, "Content-Type": "message/rfc822"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            body = json.loads(r.read())
            code = r.status
    except urllib.error.HTTPError as e:
        code, body = e.code, json.loads(e.read())
    return code, body, round(time.perf_counter() - started, 2)

def msg(frm: str, subject: str, body: str, mid: str, **headers: str) -> EmailMessage:
    """A plain-text message."""
    m = EmailMessage()
    m["From"], m["To"], m["Subject"], m["Message-ID"] = frm, "support@example.com", subject, mid
    for k, v in headers.items():
        m[k.replace("_", "-")] = v
    m.set_content(body)
    return m

# 1. A customer's ticket
bob = msg("Bob <bob@customer.test>", "My invoice has the wrong VAT number", "Please fix the VAT number on invoice 42.", "<bob-1@customer.test>")
print("bob new:", post(bytes(bob)))
# 2. 1 MiB of quoted lines ("On a a a ..." adversarial)
huge = msg("Carol <carol@customer.test>", "Huge", "Hello\n" + ("On " + "a " * 2000 + "\n") * 250 + "> quoted\n", "<carol-1@customer.test>")
raw = bytes(huge)
print("1 MiB quoted body (%d bytes):" % len(raw), post(raw))
# 3. Unknown charset
unk = (b"From: dan@customer.test\r\nTo: support@example.com\r\nSubject: charset\r\nMessage-ID: <dan-1@customer.test>\r\n"
       b"Content-Type: text/plain; charset=x-klingon\r\n\r\nMy order \xff\xfe has not arrived yet, where is it?\r\n")
print("unknown charset:", post(unk))
# 4. Spoofed sender replying into bob's thread
spoof = msg("Mallory <mallory@evil.test>", "Re: My invoice has the wrong VAT number", "Send me bob's invoice", "<mal-1@evil.test>", In_Reply_To="<bob-1@customer.test>")
print("spoofed follow-up:", post(bytes(spoof)))
# 5. Attachment only
att = EmailMessage()
att["From"], att["To"], att["Subject"], att["Message-ID"] = "erin@customer.test", "support@example.com", "", "<erin-1@customer.test>"
att.add_attachment(b"%PDF-1.4 fake", maintype="application", subtype="pdf", filename="receipt.pdf")
print("attachment only:", post(bytes(att)))
# 6. Replay of a message without a Message-ID, inside the window
nomid = (b"From: fay@customer.test\r\nTo: support@example.com\r\nSubject: replay me\r\n\r\nWhere is my refund?\r\n")
print("no Message-ID, first:", post(nomid))
print("no Message-ID, replayed:", post(nomid))
# 7. Old body-only signature and a stale timestamp
print("old signature:", post(nomid, hmac.new(ARGS.secret.encode(), nomid, hashlib.sha256).hexdigest())[:2])
print("stale timestamp:", post(nomid, sign(ARGS.secret, nomid, int(time.time()) - 600))[:2])


# ---- issue 32: hostile and odd mail
def raw(head: str, body: bytes, content_type: str = "text/plain") -> bytes:
    """Headers (\\r\\n separated) and a body of ``content_type``."""
    return (head.replace("\n", "\r\n").encode("utf-8") + b"\r\nTo: support@example.com\r\nContent-Type: "
            + content_type.encode() + b"\r\n\r\n" + body)


def mime(head: str, *parts: bytes) -> bytes:
    """A multipart/mixed of ``parts`` (each its headers, a blank line, its content)."""
    return raw(head, b"".join(b"--b\r\n" + p + b"\r\n" for p in parts) + b"--b--\r\n", "multipart/mixed; boundary=b")


def show(label: str, message: bytes) -> None:
    """POST and print one line."""
    code, body, seconds = post(message)
    print(f"{label}: {code} {body.get('outcome', body)} {seconds} s")


for size, name in ((256 * 1024, "256 KiB"), (1024 * 1024, "1 MiB")):
    show(f"HTML of '<' ({name})", raw(f"From: h@customer.test\nSubject: lt {name}\nMessage-ID: <lt{size}@c.test>",
                                      b"<" * size, "text/html"))
    show(f"HTML of '<a' ({name})", raw(f"From: h@customer.test\nSubject: a {name}\nMessage-ID: <a{size}@c.test>",
                                       b"<a" * (size // 2), "text/html"))
show("600 nested ( in From", raw("From: " + "(" * 600 + "x@customer.test\nSubject: nested\nMessage-ID: <n@c.test>",
                                 b"hello"))
for n, from_lines in enumerate(["From: bob@customer.test <mallory@evil.test>",
                                "From: bob@customer.test\nFrom: mallory@evil.test",
                                "From: bob@customer.test, mallory@evil.test",
                                "From: bob@customer.test mallory@evil.test",
                                "From: (bob@customer.test <mallory@evil.test>"]):
    show(f"ambiguous From #{n + 1} into Bob's thread", raw(
        f"{from_lines}\nSubject: Re: VAT\nMessage-ID: <amb{n}@evil.test>\nIn-Reply-To: <bob-1@customer.test>",
        b"Send me the invoice"))
show("two [T-n] tags", raw("From: bob@customer.test\nSubject: [T-1] [T-2]\nMessage-ID: <two@c.test>", b"which?"))
show("internationalised sender", raw("From: J\u00f6rg <j\u00f6rg@b\u00fccher.example>\nSubject: B\u00fccher\n"
                                     "Message-ID: <jorg@c.test>", "Wo ist meine Bestellung?".encode(),
                                     "text/plain; charset=utf-8"))
for n, header in enumerate(["Return-Path: <>", "List-Id: <parrots.lists.example>", "X-Loop: support@example.com",
                            "X-Autogenerated: Reply", "X-Auto-Response-Suppress: All",
                            "X-Failed-Recipients: x@example.org", "Auto-Submitted: auto-replied",
                            "Precedence: bulk"]):
    show(f"automatic ({header.split(':')[0]})", raw(f"{header}\nFrom: robot@customer.test\nSubject: auto\n"
                                                    f"Message-ID: <auto{n}@c.test>", b"I am away"))
show("text / image / text", mime("From: ivy@customer.test\nSubject: image\nMessage-ID: <img@c.test>",
                                 b"Content-Type: text/plain\r\n\r\nBefore the photo,",
                                 b"Content-Type: image/png\r\nContent-Disposition: inline; filename=a.png\r\n"
                                 b"Content-Transfer-Encoding: base64\r\n\r\niVBORw0KGgo=",
                                 b"Content-Type: text/plain\r\n\r\nand after it."))
show("message/rfc822", mime("From: ivy@customer.test\nSubject: fwd\nMessage-ID: <fwd@c.test>",
                            b"Content-Type: text/plain\r\n\r\nSee below.",
                            b"Content-Type: message/rfc822\r\n\r\nFrom: billing@shop.test\r\nSubject: Invoice"
                            b"\r\n\r\nInvoice 4711\r\n"))
show("inline forwarded invoice (De:/A:)", raw("From: ivy@customer.test\nSubject: invoice\nMessage-ID: <inv@c.test>",
                                              b"Charged twice!\r\n\r\nDe: billing@shop.test\r\nA: ivy@customer.test"
                                              b"\r\nSubject: Invoice 4711\r\n\r\n2 x 49.90 EUR\r\n"))
photo = EmailMessage()
photo["From"], photo["To"], photo["Subject"], photo["Message-ID"] = ("ivy@customer.test", "support@example.com",
                                                                     "photo", "<photo@c.test>")
photo.set_content("A photo of the jam.")
photo.add_attachment(bytes(3_000_000), maintype="image", subtype="jpeg", filename="jam.jpg")
show("3 MB photo", bytes(photo))
show("600 attachments", mime("From: ivy@customer.test\nSubject: many\nMessage-ID: <many@c.test>",
                             b"Content-Type: text/plain\r\n\r\nfiles", *[
                                 b"Content-Type: application/octet-stream\r\nContent-Disposition: attachment; "
                                 b"filename=f%d.bin\r\n\r\nx" % n for n in range(600)]))
show("bidi file name", mime("From: ivy@customer.test\nSubject: bidi\nMessage-ID: <bidi@c.test>",
                            b"Content-Type: text/plain\r\n\r\ninvoice",
                            "Content-Type: application/pdf\r\nContent-Disposition: attachment; "
                            "filename*=utf-8''invoice%E2%80%AEgpj.exe\r\n\r\nMZ".encode()))
show("encoded CR LF in the subject", raw("From: ivy@customer.test\nSubject: =?utf-8?q?hi=0D=0AX-Injected:=20yes?=\n"
                                         "Message-ID: <crlf@c.test>", b"Where is my parcel?"))
# Header parsing at scale (the stdlib's header decoding has had quadratic paths): many encoded words in one
# subject, one header folded over thousands of lines, and thousands of Received headers.
show("2,000 encoded words in the subject", raw("From: ivy@customer.test\nSubject: " + " ".join(
    ["=?utf-8?b?SGVsbG8=?="] * 2000) + "\nMessage-ID: <words@c.test>", b"Where is my parcel?"))
show("a header folded over 10,000 lines", raw("From: ivy@customer.test\nSubject: folded\nX-Long: start" + "".join(
    f"\n x{n}" for n in range(10_000)) + "\nMessage-ID: <fold@c.test>", b"Where is my parcel?"))
show("5,000 Received headers", raw("".join(f"Received: from relay{n}.example by mx.example; Mon, 7 Dec 2026 "
                                           f"00:00:{n % 60:02d} +0000\n" for n in range(5_000))
                                   + "From: ivy@customer.test\nSubject: hops\nMessage-ID: <hops@c.test>",
                                   b"Where is my parcel?"))
