"""Signing as Standard Webhooks specifies it, checked against the specification's published test vector."""
from webhooks.delivery import sign, signed_headers
from webhooks.models import new_secret

# The Standard Webhooks test vector (the same in the reference libraries of every language).
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = 1614265330
BODY = b'{"test": 2432232314}'


def test_the_signature_reproduces_the_specifications_test_vector():
    assert sign(SECRET, msg_id=MSG_ID, timestamp=TIMESTAMP, body=BODY) == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_headers_carry_the_id_the_timestamp_and_the_signature_of_exactly_that_body():
    headers = signed_headers(SECRET, msg_id=MSG_ID, body=BODY, timestamp=TIMESTAMP)
    assert headers["webhook-id"] == MSG_ID and headers["webhook-timestamp"] == str(TIMESTAMP)
    assert headers["webhook-signature"] == sign(SECRET, msg_id=MSG_ID, timestamp=TIMESTAMP, body=BODY)
    assert headers["webhook-signature"] != sign(SECRET, msg_id=MSG_ID, timestamp=TIMESTAMP, body=BODY + b" ")


def test_a_new_secret_is_whsec_and_24_random_bytes_in_base64():
    import base64

    first, second = new_secret(), new_secret()
    assert first.startswith("whsec_") and first != second
    assert len(base64.b64decode(first.removeprefix("whsec_"))) == 24
