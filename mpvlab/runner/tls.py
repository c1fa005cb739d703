"""Per-run TLS material for the video server: a fresh self-signed certificate made with openssl.

One key and certificate per run, written into the run's own directory (the key 0600, never copied
anywhere else, and deleted when the run ends — see `TlsMaterial.discard_key`). The certificate names
the server by IP address (subjectAltName), so the player verifies it against the exact address it
connects to; the player trusts this one certificate and nothing else (player/README.md).

Why an end-entity certificate (CA:FALSE) and not openssl's default CA:TRUE self-signed one: mod_ssl
warns about a server certificate that is a CA, and both clients here accept a self-signed CA:FALSE
certificate given as their trust anchor (measured: GnuTLS through GLib's GTlsFileDatabase, and curl's
OpenSSL with --cacert).
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpvlab.core import proc

KEY_FILE, CERT_FILE = "server.key", "server.crt"
RUN_TLS_DIR = Path("logs") / "apache" / "tls"     # inside a run's result directory
KEY_ALGORITHM = "EC P-256"     # fast to generate (ms) and to handshake; what `openssl req` below makes
VALID_DAYS = 2                 # a run never lasts longer; a stale file is useless soon after
SUBJECT_CN = "mpvlab-server"


@dataclass(frozen=True)
class TlsMaterial:
    cert: Path
    key: Path
    ip_addresses: tuple[str, ...]
    sha256_fingerprint: str        # of the DER certificate, colon-separated hex (as openssl prints it)
    not_before: str
    not_after: str

    def describe(self) -> dict[str, Any]:
        """What provenance records: enough to identify the certificate; never the key."""
        return {"certificate": str(self.cert), "sha256_fingerprint": self.sha256_fingerprint,
                "subject": f"CN={SUBJECT_CN}", "subject_alt_names": [f"IP:{a}" for a in self.ip_addresses],
                "key_algorithm": KEY_ALGORITHM, "self_signed": True, "basic_constraints": "CA:FALSE",
                "not_before": self.not_before, "not_after": self.not_after, "valid_days": VALID_DAYS}

    def discard_key(self) -> None:
        """The key is worthless after the run and must not travel with the results."""
        try:
            self.key.unlink()
        except FileNotFoundError:
            pass


def fingerprint_sha256(cert_pem: str) -> str:
    digest = hashlib.sha256(ssl.PEM_cert_to_DER_cert(cert_pem)).hexdigest().upper()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def make_self_signed(out_dir: Path, ip_addresses: list[str]) -> TlsMaterial:
    """A key and a self-signed server certificate for `ip_addresses` in `out_dir` (created 0700).
    Addresses are validated as IPv4/IPv6 literals before anything reaches openssl's argv."""
    if not ip_addresses:
        raise ValueError("a server certificate needs at least one IP address")
    addrs = [str(ipaddress.ip_address(a)) for a in ip_addresses]      # raises ValueError on anything else
    out_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(out_dir, 0o700)
    key, cert = out_dir / KEY_FILE, out_dir / CERT_FILE
    # The key file is created 0600 before openssl writes into it (openssl keeps an existing file's mode).
    key.touch(mode=0o600, exist_ok=False)
    os.chmod(key, 0o600)
    san = ",".join(f"IP:{a}" for a in addrs)
    proc.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
              "-noenc", "-days", str(VALID_DAYS), "-subj", f"/CN={SUBJECT_CN}",
              "-addext", f"subjectAltName={san}",
              "-addext", "basicConstraints=critical,CA:FALSE",
              "-addext", "keyUsage=critical,digitalSignature",
              "-addext", "extendedKeyUsage=serverAuth",
              "-keyout", str(key), "-out", str(cert)], timeout=30)
    os.chmod(cert, 0o644)   # the player (another process) reads it
    dates = proc.run(["openssl", "x509", "-in", str(cert), "-noout", "-startdate", "-enddate"], timeout=10).stdout
    fields = dict(line.split("=", 1) for line in dates.splitlines() if "=" in line)
    return TlsMaterial(cert=cert, key=key, ip_addresses=tuple(addrs),
                       sha256_fingerprint=fingerprint_sha256(cert.read_text()),
                       not_before=fields.get("notBefore", "").strip(), not_after=fields.get("notAfter", "").strip())


def spki_sha256_b64(cert: Path) -> str:
    """Base64 SHA-256 of the certificate's SubjectPublicKeyInfo: what Chromium's
    --ignore-certificate-errors-spki-list takes to trust exactly this key (and no other)."""
    pub = proc.run(["openssl", "x509", "-in", str(cert), "-noout", "-pubkey"], timeout=10).stdout
    der = ssl.PEM_cert_to_DER_cert(pub.replace("PUBLIC KEY", "CERTIFICATE"))   # the same base64 armour
    return base64.b64encode(hashlib.sha256(der).digest()).decode()
