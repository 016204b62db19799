"""Hostile mail against a running ``supportrag serve``: what each message became, and how long the webhook took.

Run by hand against a throwaway server started with INBOUND_EMAIL_SECRET set, e.g.::

    SUPPORTRAG_DATA_DIR=/tmp/smoke PORT=5077 INBOUND_EMAIL_SECRET=s3cret supportrag serve &
    python bench/hostile_mail.py --base http://127.0.0.1:5077 --secret s3cret

Sends: a customer's ticket, a 1 MiB body of adversarial "On a a a …" lines, an unknown charset, a spoofed reply
into the first customer's thread, an attachment-only message, a message without a Message-ID twice (a replay),
then the old body-only signature and a stale timestamp (both must be 401). Prints one line per message.
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
ARGS = parser.parse_args()
BASE = ARGS.base.rstrip("/") + "/api/inbound/email"

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
