# Verifying a delivery in Python with the standard library only (hmac, hashlib, base64).
import base64
import hashlib
import hmac
import time

TOLERANCE_SECONDS = 5 * 60


def verify_webhook(secret: str, headers: dict, raw_body: bytes, now=None) -> bool:
    """True when webhook-signature verifies and webhook-timestamp is within 5 minutes of now.

    secret: "whsec_..." as shown when the subscription was created.
    headers: lower-case names. raw_body: the body bytes exactly as received.
    """
    msg_id = headers["webhook-id"]
    timestamp = headers["webhook-timestamp"]
    if abs((time.time() if now is None else now) - int(timestamp)) > TOLERANCE_SECONDS:
        return False
    # The key is the base64 after "whsec_", decoded (urlsafe_b64decode reads both base64 alphabets).
    encoded = secret.removeprefix("whsec_")
    key = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    signed = f"{msg_id}.{timestamp}.".encode() + raw_body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    # One "v1,<base64>" entry per valid secret (two during a rotation overlap), space-separated.
    for entry in headers["webhook-signature"].split(" "):
        version, _, signature = entry.partition(",")
        if version == "v1" and hmac.compare_digest(signature, expected):
            return True
    return False


def verify_service_signature(secret: str, headers: dict, raw_body: bytes) -> bool:
    """The X-Service-Signature scheme: "sha256=<hex HMAC of the body>", keyed by the whole secret string."""
    expected = "sha256=" + hmac.new(secret.encode(), raw_body, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(v.strip(), expected) for v in headers["x-service-signature"].split(","))
