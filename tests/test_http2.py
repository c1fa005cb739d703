"""The server's HTTP version as a scenario option (`server: {protocol, tls}`): HTTP/1.1, HTTP/1.1 over
TLS, HTTP/2 over TLS (ALPN), with a per-run self-signed certificate the player trusts exactly.

Schema tests and the config/certificate tests need no root. The `netns` tests run the product's own
server code (mpvlab/runner/server.py: generated config, Apache, the curl protocol check, the access-log
tally) and the real player between two namespaces (prefix `hh2`), one veth, no shaping. The e2e test
runs the shipped short DASH scenario over h2 (scenarios/dash-h2-short.yaml) through `mpvlab run`.

First-principles numbers:
  * a DASH presentation is 1 MPD + one init segment per representation used + one request per media
    segment; every one must be logged as HTTP/2.0 over TLS and nothing else;
  * the player's frame accounting: rendered + discarded = duration x fps;
  * HTTP/1.1 pulls data only as the player consumes it: the client can have received at most what the
    player took + its socket receive buffer (tcp_rmem max) + libsoup's read buffers; over HTTP/2
    libsoup 3.2 reads the response to its end regardless (why the schema rejects progressive + h2).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from mpvlab.core import ledger, netns
from mpvlab import content
from mpvlab.runner import server, tls
from mpvlab.runner import steps
from mpvlab.core.netns import Netns
from mpvlab.input.scenario import ScenarioError, override, parse_scenario, resolved_dict
from mpvlab.core.paths import checkout_root

REPO = checkout_root()
from mpvlab.player.gstreamer.kind import PROGRAM  # noqa: E402
from mpvlab.testbed.player import Net  # noqa: E402

PY = sys.executable
BASE: dict[str, Any] = {"name": "h2", "paths": {"a": {}, "b": {}}}
DASH = {"kind": "dash", "duration": "12s", "bitrates": ["500kbit", "1mbit", "2mbit"], "segment": "2s",
        "width": 640, "height": 360}


# ---------------------------------------------------------------------------------------------
# Schema


def _parse(**over: Any) -> Any:
    return parse_scenario({**BASE, **over}, "test.yaml")


def test_default_is_plain_http11() -> None:
    sc = _parse()
    assert resolved_dict(sc)["server"] == {"protocol": "http/1.1", "tls": "auto"}
    assert sc.server.tls_enabled is False


def test_h2_implies_tls_and_http11_can_have_it() -> None:
    sc = _parse(server={"protocol": "h2"}, video=DASH)
    assert sc.server.tls_enabled is True
    assert _parse(server={"protocol": "http/1.1", "tls": True}).server.tls_enabled is True
    assert _parse(server={"protocol": "h2", "tls": True}, video=DASH).server.tls_enabled is True
    # A sweep switches the protocol on a resolved scenario: `auto` follows it.
    swept = override(_parse(video=DASH), {"server.protocol": "h2"})
    assert swept.server.tls_enabled is True


def test_h2c_rejected_naming_why() -> None:
    with pytest.raises(ScenarioError) as e:
        _parse(server={"protocol": "h2", "tls": False}, video=DASH)
    msg = str(e.value)
    assert "test.yaml" in msg and "server:" in msg and "ALPN" in msg and "h2c" in msg


def test_h2_progressive_rejected_naming_why() -> None:
    with pytest.raises(ScenarioError) as e:
        _parse(server={"protocol": "h2"})
    msg = str(e.value)
    assert "progressive" in msg and "player.buffer" in msg and "dash" in msg


@pytest.mark.parametrize("bad,where", [({"protocol": "h3"}, "server.protocol"), ({"protocol": "HTTP/2"}, "server.protocol"),
                                       ({"tls": "maybe"}, "server.tls"), ({"alpn": "h2"}, "server.alpn")])
def test_bad_server_fields(bad: dict[str, Any], where: str) -> None:
    with pytest.raises(ScenarioError) as e:
        _parse(server=bad, video=DASH)
    assert where in str(e.value)
    if "alpn" in bad:
        assert "allowed here: protocol, tls" in str(e.value)


# ---------------------------------------------------------------------------------------------
# Certificate and Apache config (real openssl, real `apache2 -t`)


def _openssl(*argv: str) -> str:
    return subprocess.run(["openssl", *argv], capture_output=True, text=True, check=True).stdout


def test_self_signed_certificate(tmp_path: Path) -> None:
    m = tls.make_self_signed(tmp_path / "tls", ["10.9.8.7", "127.0.0.1"])
    assert (m.key.stat().st_mode & 0o777) == 0o600 and (m.key.parent.stat().st_mode & 0o777) == 0o700
    text = _openssl("x509", "-in", str(m.cert), "-noout", "-text", "-fingerprint", "-sha256")
    assert "IP Address:10.9.8.7, IP Address:127.0.0.1" in text
    assert "CA:FALSE" in text and "TLS Web Server Authentication" in text and "prime256v1" in text
    assert f"Fingerprint={m.sha256_fingerprint}" in text
    # The key belongs to the certificate.
    assert _openssl("pkey", "-in", str(m.key), "-pubout") == _openssl("x509", "-in", str(m.cert), "-noout", "-pubkey")
    assert "key" not in json.dumps(m.describe()).replace("key_algorithm", "")
    m.discard_key()
    assert not m.key.exists() and m.cert.exists()
    # A killed run's key is removed by the ledger cleanup: the run lists it in the ledger's `secrets`
    # before the file exists (mpvlab/core/ledger.py; tests/test_failure_paths.py::test_the_cleanup_removes_a_runs_secret_files).


@pytest.mark.parametrize("addr", ["10.0.0.1; rm -rf /", "localhost", "", "10.0.0.256"])
def test_certificate_refuses_non_addresses(tmp_path: Path, addr: str) -> None:
    with pytest.raises(ValueError):
        tls.make_self_signed(tmp_path / "tls", [addr])
    assert not (tmp_path / "tls" / "server.key").exists()


@pytest.mark.parametrize("protocol,use_tls", [("http/1.1", False), ("http/1.1", True), ("h2", True)])
def test_config_passes_apache_syntax_check(tmp_path: Path, protocol: str, use_tls: bool) -> None:
    material = tls.make_self_signed(tmp_path / "tls", ["10.9.8.7"]) if use_tls else None
    http = server.HttpSetup(protocol, material)
    conf = tmp_path / "httpd.conf"
    (tmp_path / "run").mkdir()
    conf.write_text(server.render_config(tmp_path, tmp_path, http))
    cp = subprocess.run([server.APACHE_BIN, "-t", "-f", str(conf)], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    text = conf.read_text()
    assert f"Listen 0.0.0.0:{443 if use_tls else 80}" in text                   # wildcard (MPTCP joins)
    assert ("mod_ssl.so" in text) == use_tls and ("mod_http2.so" in text) == (protocol == "h2")
    assert ("Protocols h2 http/1.1" in text) == (protocol == "h2")
    assert "H2Direct off" in text if protocol == "h2" else "H2" not in text
    assert http.describe()["port"] == http.port == (443 if use_tls else 80)
    with pytest.raises(ValueError):
        server.HttpSetup("h2", None)


# ---------------------------------------------------------------------------------------------
# Server + player between two namespaces


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    video = content.ensure_progressive(steps.CONTENT_DIR, 30, 2_000_000, 640, 360, 30)
    n = os.getpid() % 100000
    net = Net(srv=f"hh2{n}s", cli=f"hh2{n}c", srv_if=f"hh2{n}s", cli_if=f"hh2{n}c", srv_ip="10.79.0.1",
              cli_ip="10.79.0.2", rmem=(4096, 65536, 131072))
    www = Path(tempfile.mkdtemp(prefix="hh2-www-"))          # www-data must traverse the web root
    os.chmod(www, 0o755)
    os.symlink(video.path, www / "v.mp4")
    work = tmp_path_factory.mktemp("hh2")
    servers: list[server.ApacheServer] = []

    def start(protocol: str, name: str) -> tuple[server.ApacheServer, server.HttpSetup]:
        for a in servers:          # one listener on 443 at a time
            a.stop()
        material = tls.make_self_signed(work / name / "tls", [net.srv_ip, "127.0.0.1"])
        http = server.HttpSetup(protocol, material)
        # No mptcpize here (plain TCP is enough to check protocols); reno: allowed in a namespace.
        a = server.start_apache(Netns(net.srv), work / name, www, cc="reno", http=http, mptcp=False)
        servers.append(a)
        server.wait_serving(a, http.url("127.0.0.1", "v.mp4"), http=http)
        return a, http

    try:
        net.up()
        yield {"net": net, "video": video, "start": start, "work": work}
    finally:
        for a in servers:
            a.stop()
        net.down()
        shutil.rmtree(www, ignore_errors=True)


def _player(net: Net, url: str, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    out.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(net.ns(net.cli, [PY, "-m", PROGRAM, "--url", url, "--events", str(out / "ev.jsonl"),
                                             "--summary", str(out / "s.json"), "--timeout-s", "30", *extra]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _client_bytes_received(net: Net, port: int) -> int:
    """TCP bytes the client has received on its connection(s) to `port` (ss -ti)."""
    out = subprocess.run(net.ns(net.cli, ["ss", "-tinH", "state", "established", f"dport = :{port}"]),
                         capture_output=True, text=True, check=True).stdout
    return sum(int(x) for x in re.findall(r"bytes_received:(\d+)", out))


@pytest.mark.netns
def test_protocol_check_and_flow_control(bed: dict[str, Any], tmp_path: Path) -> None:
    """curl's check sees what Apache speaks; the player pulls HTTP/1.1-over-TLS data only as it plays,
    while over HTTP/2 libsoup takes the whole response at once (the reason for the schema's refusal)."""
    net: Net = bed["net"]
    size = bed["video"].path.stat().st_size                                      # ~7.5 MB
    a11, h11 = bed["start"]("http/1.1", "h11")
    pre = server.verify_protocol(Netns(net.cli), h11, h11.url(net.srv_ip, "v.mp4"))
    assert (pre["http_version"], pre["alpn"], pre["tls_version"]) == ("1.1", "http/1.1", "TLSv1.3")
    # Asking an HTTP/1.1-only server for h2 fails the check (curl falls back to 1.1 by ALPN).
    with pytest.raises(server.ProtocolMismatch, match="wanted HTTP/2"):
        server.verify_protocol(Netns(net.cli), server.HttpSetup("h2", h11.tls), h11.url(net.srv_ip, "v.mp4"))

    p = _player(net, h11.url(net.srv_ip, "v.mp4"), tmp_path / "h11", "--ca-file", str(h11.tls.cert),
                "--no-decode", "--buffer-ms", "1000")
    time.sleep(3.0)
    got_h11 = _client_bytes_received(net, h11.port)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=10)
    s11 = json.loads((tmp_path / "h11" / "s.json").read_text())
    # Received <= what the player took + rmem max (131072) + libsoup/TLS read buffers (<= 256 KiB).
    assert s11["libsoup"] == "3" and s11["tls_sources"] == 1
    assert 0 < got_h11 <= s11["bytes_received"] + 131072 + 262144, (got_h11, s11["bytes_received"])
    assert got_h11 < size / 2

    a2, h2 = bed["start"]("h2", "h2")          # stops the HTTP/1.1 server first
    pre = server.verify_protocol(Netns(net.cli), h2, h2.url(net.srv_ip, "v.mp4"))
    assert (pre["http_version"], pre["alpn"]) == ("2", "h2")
    p = _player(net, h2.url(net.srv_ip, "v.mp4"), tmp_path / "h2", "--ca-file", str(h2.tls.cert),
                "--no-decode", "--buffer-ms", "1000")
    time.sleep(3.0)
    got_h2 = _client_bytes_received(net, h2.port)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=10)
    s2 = json.loads((tmp_path / "h2" / "s.json").read_text())
    # The whole file (plus HTTP/2 and TLS framing) is in the client while the player took a fraction.
    assert got_h2 >= size and s2["bytes_received"] < size / 2, (got_h2, s2["bytes_received"], size)
    print(f"HTTP/1.1+TLS: client received {got_h11} B, player took {s11['bytes_received']} B; "
          f"h2: received {got_h2} B, player took {s2['bytes_received']} B, file {size} B")
    tally = server.tally_access_log(a2.root / "access.log", h2)
    assert tally["by_protocol"] == {"HTTP/2.0": 1} and tally["ok"]
    assert tally["excluded"] == {"preflight": 1, "loopback": 1}
    # The HTTP/1.1 server's log, judged as if h2 had been wanted, is not ok.
    wrong = server.tally_access_log(a11.root / "access.log", h2)
    assert not wrong["ok"] and wrong["other_protocol"] == wrong["requests"] == 1


@pytest.mark.netns
def test_player_trusts_only_the_given_certificate(bed: dict[str, Any], tmp_path: Path) -> None:
    """A certificate other than the server's: the player refuses (no request reaches Apache) and
    names the TLS failure; without --ca-file the system store does not know the server either."""
    net: Net = bed["net"]
    a, http = bed["start"]("h2", "trust")
    other = tls.make_self_signed(tmp_path / "other", [net.srv_ip])      # same name, different key
    for extra in (["--ca-file", str(other.cert)], []):
        p = _player(net, http.url(net.srv_ip, "v.mp4"), tmp_path / "p", *extra, "--no-decode")
        assert p.wait(timeout=20) == 2
        s = json.loads((tmp_path / "p" / "s.json").read_text())
        assert s["status"] == "error" and "TLS handshake" in s["reason"] and "fail" in s["reason"], s["reason"]
    tally = server.tally_access_log(a.root / "access.log", http)
    assert tally["requests"] == 0 and not tally["ok"]
    a.stop()


# ---------------------------------------------------------------------------------------------
# End to end: the shipped short DASH scenario over h2 (scenarios/dash-h2-short.yaml)


@pytest.mark.netns
@pytest.mark.e2e
def test_dash_over_h2_end_to_end(tmp_path: Path) -> None:
    f = REPO / "scenarios" / "dash-h2-short.yaml"
    results = tmp_path / "results"
    t = time.monotonic()
    cp = subprocess.run([PY, "-m", "mpvlab", "run", str(f), "--results", str(results)], capture_output=True,
                        text=True, timeout=180, cwd=REPO)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert time.monotonic() - t < 60
    (run,) = [d for d in (results / "dash-h2-short").iterdir() if d.is_dir()]
    s = json.loads((run / "summary.json").read_text())
    prov = json.loads((run / "provenance.json").read_text())
    ps = json.loads((run / "logs" / "player-summary.json").read_text())

    # Every request the player made is in the log as HTTP/2.0 over TLS: 1 MPD + one init segment per
    # representation used + one request per media segment (6 of 2 s).
    reps_used = {g["level"] for g in ps["segments"]}
    assert len(ps["segments"]) == 6
    want = 1 + len(reps_used) + 6
    h = s["http"]
    assert h["by_protocol"] == {"HTTP/2.0": want} and h["requests"] == want
    assert set(h["by_tls_version"]) <= {"TLSv1.3", "TLSv1.2"} and "-" not in h["by_tls_version"]
    assert h["player_libsoup"] == "3" and h["excluded"]["preflight"] == 1
    assert (h["preflight"]["http_version"], h["preflight"]["alpn"]) == ("2", "h2")
    # The player's frame accounting holds.
    assert s["frames_expected"] == 360 and s["frames_rendered"] + s["picture_discards"] == 360
    assert s["frames_accounted"] is True
    # Both MPTCP subflows (one per path) carried data, and the cross-checks hold over TLS too.
    clients = {p["client_addr"] for p in prov["topology"]["paths"].values()}
    assert {x["peer"].rsplit(":", 1)[0] for x in s["subflows"]} == clients and len(clients) == 2
    assert {x["local"] for x in s["subflows"]} == {f"{prov['topology']['server_addr']}:443"}
    assert all(p["share"] >= 0.05 and p["payload_bytes_handed"] > 0 for p in s["paths"].values()), s["paths"]
    assert all(c["ok"] for c in s["cross_checks"].values()), s["cross_checks"]
    # Provenance names the certificate; the key is gone, the certificate stays.
    cert = prov["http"]["certificate"]
    tls_dir = run / "logs" / "apache" / "tls"
    assert cert["sha256_fingerprint"] == tls.fingerprint_sha256((tls_dir / "server.crt").read_text())
    assert not (tls_dir / "server.key").exists()
    assert prov["http"]["protocol"] == "h2" and prov["http"]["h2_settings"]["H2Direct"] == "off"
    assert prov["packages"]["debian"]["libsoup-3.0-0"]
    # Nothing of the run is left on the host.
    assert not [n for n in netns.list_netns() if s["run_id"] in n]
    assert not (ledger.LEDGER_DIR / f"{s['run_id']}.json").exists()
