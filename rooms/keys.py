"""Paired satellites' keys: each side (the hub, `handoff satellite`) has a key and a self-signed
certificate of its own, made once (`cryptography`: Python's ssl cannot make keys), and pins the
other side's certificate when they pair (rooms.pairing). The link is TLS 1.3 from Python's `ssl`,
each side presenting its certificate and accepting only the one it pinned: no certificate
authority, no host names (a satellite's address may change; its key does not).

Files (under the state directory, `rooms/`; keys 0600, never logged):

    hub/key.pem, hub/cert.pem              the hub's own
    hub/paired/<room>.pem                  each paired satellite's certificate
    satellite/key.pem, satellite/cert.pem  `handoff satellite`'s own
    satellite/hub.pem                      its one paired hub's certificate
    satellite/pairing.json                 an open pairing window (rooms.pairing), while open
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from wyoming.client import AsyncTcpClient
from wyoming.event import Event, async_read_event, async_write_event
from wyoming.info import Describe

from config.rooms import SatelliteSpec

PAIR_NAME = "pair.handoff"  # the server name a hub asks for to pair (the satellite's SNI switch)
LINK_NAME = "link.handoff"  # ... for a paired link
CONFIRM_S = 5.0  # a paired satellite answers the first describe within this


def fingerprint(cert_pem: str | bytes) -> str:
    """SHA-256 of the certificate (DER), hex."""
    pem = cert_pem.encode() if isinstance(cert_pem, str) else cert_pem
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem.decode())).hexdigest()


def short_fingerprint(cert_pem: str | bytes) -> str:
    """What a person compares: the first 16 hex digits, in fours."""
    fp = fingerprint(cert_pem)[:16].upper()
    return " ".join(fp[i:i + 4] for i in range(0, 16, 4))


def write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    os.replace(temp, path)


def write_public(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(path.suffix + ".tmp")
    temp.write_text(text)
    os.replace(temp, path)


@dataclass(frozen=True)
class Identity:
    """One side's key and certificate, as files (ssl loads them by path)."""

    key_path: Path
    cert_path: Path

    @property
    def cert_pem(self) -> str:
        return self.cert_path.read_text()


def identity(folder: Path, name: str) -> Identity:
    """The key and certificate in `folder`, made now if there are none (an EC P-256 key)."""
    key_path, cert_path = folder / "key.pem", folder / "cert.pem"
    if key_path.exists() and cert_path.exists():
        return Identity(key_path, cert_path)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"handoff {name}")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=365 * 100))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    write_private(key_path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))  # fmt: skip
    write_public(cert_path, cert.public_bytes(serialization.Encoding.PEM).decode())
    return Identity(key_path, cert_path)


def _base(identity: Identity | None, purpose: ssl.Purpose) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if purpose is ssl.Purpose.CLIENT_AUTH else ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    if identity is not None:
        context.load_cert_chain(identity.cert_path, identity.key_path)
    return context


def hub_context(identity: Identity, satellite_pem: str | None) -> ssl.SSLContext:
    """The hub's side: its certificate, and only `satellite_pem` accepted. None: to pair, any
    satellite, and no certificate shown (the pairing message carries it; the code proves both)."""
    context = _base(identity if satellite_pem is not None else None, ssl.Purpose.SERVER_AUTH)
    context.check_hostname = False  # pinned: the certificate is the name
    if satellite_pem is None:
        context.verify_mode = ssl.CERT_NONE
    else:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cadata=satellite_pem)
    return context


class SatelliteContexts:
    """`handoff satellite`'s side. One listening socket; the hub's server name picks the context
    (`sni_callback`): to pair (nothing but pairing is served on it: the code proves who it is) or
    the link (only the pinned hub's certificate verifies). OpenSSL keeps the first context's
    verify mode across the switch, so it asks for a certificate without requiring one (a wrong
    one fails the handshake); a link connection without one is closed before anything is read
    (`verified`)."""

    def __init__(self, identity: Identity, hub_pem: str | None) -> None:
        self._identity = identity
        self.pairing = _base(identity, ssl.Purpose.CLIENT_AUTH)
        self.link = self._link(hub_pem)
        self.listening = _base(identity, ssl.Purpose.CLIENT_AUTH)  # replaced per connection below
        self.listening.verify_mode = ssl.CERT_OPTIONAL  # see above
        self.listening.sni_callback = self._choose

    def _link(self, hub_pem: str | None) -> ssl.SSLContext:
        context = _base(self._identity, ssl.Purpose.CLIENT_AUTH)
        context.verify_mode = ssl.CERT_REQUIRED  # no pinned hub: no certificate passes
        if hub_pem is not None:
            context.load_verify_locations(cadata=hub_pem)
        return context

    def pin(self, hub_pem: str) -> None:
        """A hub paired: from the next connection on, only it."""
        self.link = self._link(hub_pem)

    def _choose(self, connection: ssl.SSLObject, server_name: str | None, _context: ssl.SSLContext) -> None:
        connection.context = self.pairing if server_name == PAIR_NAME else self.link

    def is_pairing(self, connection: ssl.SSLObject | None) -> bool:
        return connection is not None and connection.context is self.pairing

    def verified(self, connection: ssl.SSLObject | None) -> bool:
        """A link connection whose certificate verified against the pinned hub's."""
        return connection is not None and connection.context is self.link and peer_pem(connection) is not None


def peer_pem(connection: ssl.SSLObject | None) -> str | None:
    """The other side's certificate, as PEM (None: it sent none)."""
    der = connection.getpeercert(binary_form=True) if connection is not None else None
    return ssl.DER_cert_to_PEM_cert(der) if der else None


class NotPaired(Exception):
    """A room marked paired (not `unauthenticated:`) whose satellite this hub has no key for."""


class TlsClient(AsyncTcpClient):
    """The wyoming package's client over TLS (it has none of its own): a paired satellite."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext) -> None:
        super().__init__(host, port)
        self._context = context
        self._first: Event | None = None  # the satellite's answer to the hub's first describe

    async def connect(self) -> None:
        """Connected once the satellite has answered: in TLS 1.3 the client's handshake ends
        before the server has checked the client's certificate, so a satellite paired with
        another hub is found out by its first answer (a refusal), not by the handshake."""
        try:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port, ssl=self._context,
                                                                       server_hostname=LINK_NAME)  # fmt: skip
            await async_write_event(Describe().event(), self._writer)
            async with asyncio.timeout(CONFIRM_S):
                self._first = await async_read_event(self._reader)
            if self._first is None:
                raise ConnectionResetError("the satellite closed the connection at once")
        except (ssl.SSLError, ConnectionResetError, asyncio.IncompleteReadError) as exc:  # a key it did not pin
            await self.disconnect()
            why = exc.reason if isinstance(exc, ssl.SSLError) and exc.reason else str(exc) or exc.__class__.__name__
            raise NotPaired(f"the satellite at {self.host}:{self.port} and this hub do not know each other's keys "
                            f"({why}): pair them again (`handoff satellite pair` there, `handoff rooms pair ROOM CODE` "
                            "here)") from None

    async def read_event(self) -> Event | None:
        if self._first is not None:
            first, self._first = self._first, None
            return first
        return await super().read_event()


def paired_client(spec: SatelliteSpec, address: str, keys: Any) -> TlsClient:
    """A connection to a paired satellite (`keys`: rooms.pairing.HubKeys)."""
    pinned = keys.satellite_pem(spec.room) if keys is not None else None
    if pinned is None:
        raise NotPaired(f"the {spec.room} satellite is not paired: run `handoff satellite pair` there, then "
                        f"`handoff rooms pair {spec.room} CODE` here (or mark it unauthenticated: in SATELLITES)")
    return TlsClient(address, spec.port, hub_context(keys.identity, pinned))


async def open_paired(spec: SatelliteSpec, address: str, keys: Any) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The streams of a paired satellite's link, once it has answered (see `TlsClient.connect`):
    the hub reads them with `rooms.wire.read`, which never raises on a bad frame."""
    client = paired_client(spec, address, keys)
    await client.connect()
    assert client._reader is not None and client._writer is not None
    return client._reader, client._writer


def exposure(spec: SatelliteSpec) -> str:
    """What `check`, `status` and the page say a room's link protects."""
    if spec.unauthenticated:
        return ("unauthenticated: anyone on the network can hear this room's audio and play sounds in it "
                "(plain Wyoming, marked so in SATELLITES)")
    return "paired: authenticated and encrypted (TLS 1.3, both keys pinned)"
