"""Signing: ed25519 keys and DSSE envelopes for release statements and shared registries.

An envelope signs the exact payload bytes (DSSE's pre-authentication encoding of the payload
type and payload), so no canonical JSON is needed. A threshold counts distinct public keys:
two signatures by one key count once. ``cryptography`` is imported when a key is first used,
so reading a plain registry does not import it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcs_host._files import PRIVATE, InputError, create_new, loads_json

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

__all__ = [
    "Envelope",
    "PrivateKey",
    "PublicKey",
    "SignatureError",
    "pae",
]

_PREFIX = "ed25519:"


class SignatureError(Exception):
    """A signature or envelope does not verify; ``reason`` is a short code."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class PublicKey:
    """An ed25519 public key, written ``ed25519:<base64 of the 32 raw bytes>``."""

    raw: bytes

    @classmethod
    def parse(cls, text: str) -> PublicKey:
        if not text.startswith(_PREFIX):
            raise ValueError(f"public key {text!r} does not start with {_PREFIX!r}")
        try:
            raw = base64.b64decode(text[len(_PREFIX) :], validate=True)
        except binascii.Error as exc:
            raise ValueError(f"public key {text!r} is not valid base64: {exc}") from None
        if len(raw) != 32:
            raise ValueError(f"public key {text!r} has {len(raw)} bytes, not 32")
        return cls(raw)

    @property
    def keyid(self) -> str:
        """The sha256 of the raw key, in hex: how envelopes and registries name it."""
        return hashlib.sha256(self.raw).hexdigest()

    def __str__(self) -> str:
        return _PREFIX + base64.b64encode(self.raw).decode("ascii")

    def verify(self, signature: bytes, message: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, message)
        except InvalidSignature:
            return False
        return True


class PrivateKey:
    """An ed25519 private key, stored as an unencrypted PKCS#8 PEM file readable by its owner."""

    __slots__ = ("_key",)

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key

    @classmethod
    def generate(cls) -> PrivateKey:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PrivateKey:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        with open(path, "rb") as f:
            data = f.read()
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f"{os.fspath(path)}: not an unencrypted PEM private key: {exc}"
            ) from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"{os.fspath(path)}: not an ed25519 key")
        return cls(key)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the key to a new file with mode 0600; a file or symbolic link already at
        ``path`` is never written over or through (``FileExistsError``)."""
        from cryptography.hazmat.primitives import serialization

        pem = self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        create_new(path, pem, "the key file", mode=PRIVATE)

    @property
    def public_key(self) -> PublicKey:
        from cryptography.hazmat.primitives import serialization

        raw = self._key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return PublicKey(raw)

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what a signature actually covers."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


@dataclass(frozen=True, slots=True)
class Envelope:
    """A DSSE envelope: a typed payload and signatures over its pre-authentication encoding."""

    payload_type: str
    payload: bytes
    signatures: tuple[tuple[str, bytes], ...] = ()
    """``(keyid, signature)`` pairs; the keyid is only a hint for finding the key."""

    @classmethod
    def sign(cls, payload: bytes, payload_type: str, keys: Sequence[PrivateKey]) -> Envelope:
        return cls(payload_type, payload).add_signatures(keys)

    def add_signatures(self, keys: Sequence[PrivateKey]) -> Envelope:
        """This envelope with a signature by each of ``keys`` (replacing theirs, if present)."""
        message = pae(self.payload_type, self.payload)
        added = {key.public_key.keyid: key.sign(message) for key in keys}
        kept = tuple((k, s) for k, s in self.signatures if k not in added)
        return Envelope(self.payload_type, self.payload, kept + tuple(added.items()))

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any], source: str) -> Envelope:
        """Parse an envelope; ``source`` names it in errors."""
        try:
            raw = loads_json(data, source) if isinstance(data, bytes | str) else data
            if not isinstance(raw, Mapping):
                raise TypeError("not a JSON object")
            payload = base64.b64decode(raw["payload"], validate=True)
            signatures = tuple(
                (str(entry.get("keyid", "")), base64.b64decode(entry["sig"], validate=True))
                for entry in raw["signatures"]
            )
            payload_type = raw["payloadType"]
            if not isinstance(payload_type, str):
                raise TypeError("payloadType is not a string")
        except InputError as exc:
            raise SignatureError("malformed", f"not a DSSE envelope: {exc}") from None
        except (ValueError, TypeError, KeyError, AttributeError, binascii.Error) as exc:
            raise SignatureError("malformed", f"{source}: not a DSSE envelope: {exc!r}") from None
        return cls(payload_type, payload, signatures)

    def to_json(self) -> dict[str, Any]:
        return {
            "payloadType": self.payload_type,
            "payload": base64.b64encode(self.payload).decode("ascii"),
            "signatures": [
                {"keyid": keyid, "sig": base64.b64encode(sig).decode("ascii")}
                for keyid, sig in self.signatures
            ],
        }

    def verify(
        self, trusted: Iterable[PublicKey], threshold: int, source: str
    ) -> tuple[PublicKey, ...]:
        """The distinct trusted keys with a valid signature; at least ``threshold`` of them.

        Raises :class:`SignatureError` (``under-signed``) naming what was found.
        """
        if threshold < 1:
            raise ValueError("a threshold is at least 1")
        keys = {key.keyid: key for key in trusted}
        message = pae(self.payload_type, self.payload)
        valid: dict[str, PublicKey] = {}
        invalid = unknown = duplicate = 0
        for keyid, signature in self.signatures:
            candidates = [keys[keyid]] if keyid in keys else list(keys.values())
            signer = next((k for k in candidates if k.verify(signature, message)), None)
            if signer is None:
                if keyid in keys:
                    invalid += 1
                else:
                    unknown += 1
            elif signer.keyid in valid:
                duplicate += 1
            else:
                valid[signer.keyid] = signer
        if len(valid) < threshold:
            notes = [f"{len(valid)} valid from distinct trusted keys"]
            notes += [
                f"{n} {what}"
                for n, what in (
                    (duplicate, "more by a key already counted"),
                    (invalid, "invalid"),
                    (unknown, "by keys not trusted here"),
                )
                if n
            ]
            raise SignatureError(
                "under-signed",
                f"{source}: {threshold} signature(s) by distinct trusted keys needed; "
                f"{len(self.signatures)} present: {', '.join(notes)}",
            )
        return tuple(valid.values())
