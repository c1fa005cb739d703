"""The GStreamer player's command line: the contract's (mpvlab/player/contract.py) and its own, each
value checked before GStreamer starts (an error names the option and what is allowed)."""

from __future__ import annotations

import argparse
import json
import urllib.parse
from pathlib import Path

from mpvlab.player.contract import add_common_args
from mpvlab.player.gstreamer.kind import DASHDEMUX_ABRS


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, defaults filled in and checked in a fixed order (the first wrong value is the
    one reported, as it always was)."""
    ap = _parser()
    a = ap.parse_args(argv)
    if urllib.parse.urlsplit(a.url).path.endswith(".mpd"):
        a.dash = True
    if a.buffer_ms is None:
        a.buffer_ms = 30000.0 if a.dash else 2000.0
    if a.dash and a.fetcher == "own":
        _check_own_fetcher(ap, a)
    elif a.dash and a.abr not in DASHDEMUX_ABRS:
        ap.error(f"--abr {a.abr!r}: the dashdemux fetcher knows {' and '.join(DASHDEMUX_ABRS)}; "
                 "the registry's algorithms need --fetcher own")
    if a.dash and a.fetcher == "dashdemux" and a.abr == "bba":
        _check_bba(ap, a)
    _check_settings(ap, a)
    return a


def _parser() -> argparse.ArgumentParser:
    """The contract's options and the GStreamer player's own, with their defaults and help."""
    ap = argparse.ArgumentParser(description="mpvlab headless player with QoE counters")
    add_common_args(ap, timeout_default=None)
    ap.add_argument("--mode", choices=("discard", "rebuffer"), default="discard")
    ap.add_argument("--max-lateness-ms", type=float, default=20.0,
                    help="sink drops frames later than this (picture discards)")
    ap.add_argument("--buffer-ms", type=float, default=None,
                    help="playout buffer: max media time held in the queue before the decoder "
                         "(default 2000; DASH: 30000)")
    ap.add_argument("--rebuffer-resume-ms", type=float, default=1000.0,
                    help="rebuffer mode: resume once this much media is buffered")
    ap.add_argument("--startup-buffer-ms", type=float, default=1000.0,
                    help="start the clock once this much media is buffered (both modes)")
    ap.add_argument("--underflow-merge-ms", type=float, default=200.0,
                    help="underruns separated by less non-empty time than this are one episode")
    ap.add_argument("--ca-file", type=Path, default=None,
                    help="https:// only: trust exactly the certificate(s) in this PEM file "
                         "(souphttpsrc tls-database); verification is never disabled")
    ap.add_argument("--http-retries", type=int, default=0,
                    help="souphttpsrc retries (default 0: a failed request is an error)")
    ap.add_argument("--no-decode", action="store_true",
                    help="light mode: no decoder; compressed frames are synced and counted")
    ap.add_argument("--dash", action="store_true",
                    help="the URL is a DASH MPD (implied when its path ends in .mpd)")
    ap.add_argument("--fetcher", choices=("dashdemux", "own"), default="dashdemux",
                    help="DASH: who fetches — GStreamer's dashdemux (ABR gst|bba) or mpvlab's own client "
                         "(mpvlab/player/gstreamer/dash_client.py; ABR from the registry mpvlab/player/gstreamer/abr)")
    ap.add_argument("--abr", default="gst",
                    help="DASH rate adaptation. dashdemux: gst (its own) | bba. own: an algorithm of "
                         "the registry mpvlab/player/gstreamer/abr (throughput, bba, bola, dynamic, festive, sabre, on-off)")
    ap.add_argument("--abr-params", default="{}",
                    help="own fetcher: the ABR's parameters as a JSON object (validated by its model)")
    ap.add_argument("--seed", type=int, default=0,
                    help="own fetcher: seed of the ABR's randomness (FESTIVE's request scheduling)")
    ap.add_argument("--rcvbuf-bytes", type=int, default=None,
                    help="own fetcher: SO_RCVBUF of the client socket, an explicit cap (default: the "
                         "namespace's tcp_rmem autotuning, as the SABRE paper's on/off client; sabre sets "
                         "its own abr-params rcvbuf_bytes, 256 KiB, when this is not given)")
    ap.add_argument("--http-version", choices=("http/1.1", "h2"), default="http/1.1",
                    help="own fetcher: HTTP/1.1 (http:// or, over TLS, https://) or HTTP/2 (https:// only: "
                         "TLS ALPN h2, mpvlab/player/gstreamer/h2_conn.py)")
    ap.add_argument("--no-mptcp", action="store_true",
                    help="own fetcher: plain TCP socket instead of IPPROTO_MPTCP")
    ap.add_argument("--bba-reservoir-s", type=float, default=5.0,
                    help="BBA: buffer level (s) up to which the lowest rate is chosen")
    ap.add_argument("--bba-cushion-s", type=float, default=15.0,
                    help="BBA: buffer span (s) above the reservoir over which the rate map "
                         "climbs to the highest rate")
    ap.add_argument("--gst-bitrate-limit", type=float, default=0.8,
                    help="gst ABR: dashdemux bitrate-limit (share of the measured rate to use)")
    return ap


def _check_own_fetcher(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """--fetcher own: its ABR from the registry and that ABR's parameters (pydantic, imported only
    here: a physical host's system Python may not have it), the socket and the HTTP version."""
    try:
        from mpvlab.player.gstreamer.abr import REGISTRY as ABR_REGISTRY
    except ModuleNotFoundError as e:
        ap.error(f"--fetcher own needs the Python module {e.name!r} on this host (pip install -r requirements.txt)")
    if a.abr not in ABR_REGISTRY:
        ap.error(f"--abr {a.abr!r} with --fetcher own: one of {', '.join(sorted(ABR_REGISTRY))}")
    try:
        a.abr_params = json.loads(a.abr_params)
    except ValueError as e:
        ap.error(f"--abr-params is not JSON: {e}")
    if not isinstance(a.abr_params, dict) or len(json.dumps(a.abr_params)) > 4096:
        ap.error("--abr-params must be a JSON object (at most 4096 characters)")
    try:
        ABR_REGISTRY[a.abr].Params.model_validate(a.abr_params)
    except Exception as e:        # pydantic's message names the field and what is allowed
        ap.error(f"--abr-params for {a.abr}: {e}")
    if a.rcvbuf_bytes is not None and not 4096 <= a.rcvbuf_bytes <= 1 << 30:
        ap.error("--rcvbuf-bytes must be in [4096, 2^30]")
    if a.http_version == "h2" and not a.url.startswith("https://"):
        ap.error("--http-version h2 needs an https:// URL (HTTP/2 is negotiated by TLS ALPN)")
    if a.http_version == "h2":
        try:
            import h2  # noqa: F401
        except ModuleNotFoundError:
            ap.error("--http-version h2 needs the Python package 'h2' (pip install -r requirements.txt)")


def _check_bba(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """dashdemux with BBA: a rate map whose top rate the playout buffer can reach."""
    if a.bba_reservoir_s < 0 or a.bba_cushion_s <= 0:
        ap.error("--bba-reservoir-s must be >= 0 and --bba-cushion-s > 0")
    if a.bba_reservoir_s + a.bba_cushion_s >= a.buffer_ms / 1000:
        ap.error(f"BBA reservoir + cushion ({a.bba_reservoir_s + a.bba_cushion_s:g} s) must be "
                 f"below the playout buffer ({a.buffer_ms / 1000:g} s, --buffer-ms), "
                 "or the top rate is never reached")


def _check_settings(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Every run's settings: the ranges of the numbers, the URL's scheme and the trust file."""
    if not 0 < a.gst_bitrate_limit <= 1:
        ap.error("--gst-bitrate-limit must be in (0, 1]")
    if a.buffer_ms <= 0 or a.max_lateness_ms < 0 or a.rebuffer_resume_ms < 0 \
            or a.underflow_merge_ms < 0 or a.startup_buffer_ms < 0:
        ap.error("buffer/lateness/resume/merge values must be non-negative (buffer > 0)")
    if a.timeout_s is not None and a.timeout_s <= 0:
        ap.error("--timeout-s must be > 0")
    if not a.url.startswith(("http://", "https://")):
        ap.error("--url must be http:// or https://")
    if a.ca_file is not None:
        if not a.url.startswith("https://"):
            ap.error("--ca-file is for https:// URLs")
        if not a.ca_file.is_absolute() or not a.ca_file.is_file():
            # GTlsFileDatabase needs an absolute path; a missing file would only show up as
            # "Unacceptable TLS certificate" at the first request.
            ap.error(f"--ca-file {a.ca_file}: not an absolute path to an existing file")
