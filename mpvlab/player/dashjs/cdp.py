"""A minimal DevTools-protocol session on one page target, and the browser's own record of what went
wrong on the page: every uncaught exception, console message, log entry and failed request, kept in
the run's data (data/dashjs/browser-events.jsonl) so that a page that misbehaved can be explained by
the browser itself rather than guessed at from the server's side.

Kept from the protocol's events (each line: `t_ns` CLOCK_MONOTONIC at receipt, `method`, the fields
below; Chromium's own `timestamp` of Network events is base::TimeTicks, CLOCK_MONOTONIC on Linux):
Runtime.exceptionThrown, Runtime.consoleAPICalled, Log.entryAdded, Network.loadingFailed (with its
errorText and the request's URL), Network.requestWillBeSent / responseReceived / loadingFinished
(URL, status, protocol, connection id and whether it was reused, disk cache or service worker),
Runtime.executionContextCreated/Destroyed/Cleared, Page.frameNavigated, Page.domContentEventFired,
Page.loadEventFired, Inspector.targetCrashed/detached. Network.dataReceived and the ExtraInfo events
are not kept (many per segment, nothing this record needs)."""

from __future__ import annotations

import ipaddress
import json
import select
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any, Callable

TEXT_MAX = 2000          # characters of one message, exception or argument kept
LINES_MAX = 50_000       # lines per run (a 2-hour run requests ~3,000 segments: 4 lines each)
DOMAINS = ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable")


def _text(v: Any) -> str:
    return str(v)[:TEXT_MAX]


def _arg(a: dict[str, Any]) -> Any:
    """A console argument as the console would show it: its value, else its description."""
    if "value" in a:
        v = a["value"]
        return _text(v) if isinstance(v, str) else v
    return _text(a.get("description") or a.get("unserializableValue") or a.get("type"))


class BrowserLog:
    """Writes the kept events to `path` (JSONL) as they arrive, and keeps what went wrong in memory:
    exceptions, console errors and network failures, each with its line number (`since` a mark)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = path.open("w")
        self.lines = 0
        self.dropped = 0          # over LINES_MAX
        self.skipped = 0          # events of kinds not kept (Network.dataReceived, …)
        self.urls: dict[str, str] = {}       # requestId → URL
        self.problems: list[dict[str, Any]] = []   # exceptions, console/log errors, failed requests
        self.netlink: list[dict[str, Any]] = []   # address/link changes in the browser's namespace
        self.lock = threading.Lock()          # the NetlinkWatch thread writes here too

    def mark(self) -> int:
        """A position in the problem list, for `problems_since`."""
        return len(self.problems)

    def problems_since(self, mark: int) -> list[dict[str, Any]]:
        return self.problems[mark:]

    def __call__(self, msg: dict[str, Any]) -> None:
        method = str(msg.get("method", ""))
        rec = self._keep(method, msg.get("params") or {})
        if rec is None:
            self.skipped += 1
            return
        self.write({"t_ns": time.monotonic_ns(), "method": method, **rec})

    def write(self, rec: dict[str, Any]) -> None:
        with self.lock:
            self._write(rec)

    def _write(self, rec: dict[str, Any]) -> None:
        if rec["method"] == "netlink":
            self.netlink.append(rec)
        if rec.pop("_problem", False):
            self.problems.append(rec)
        if self.lines >= LINES_MAX:
            self.dropped += 1
            return
        self.fh.write(json.dumps(rec) + "\n")
        self.fh.flush()       # the record must survive a SIGKILL of the driver
        self.lines += 1

    def _keep(self, method: str, p: dict[str, Any]) -> dict[str, Any] | None:
        keep = _KEEP.get(method)
        return keep(self, p) if keep is not None else None

    def summary(self) -> dict[str, Any]:
        """For player-summary.json: counts, and the problems themselves (the first 20)."""
        kinds: dict[str, int] = {}
        for pr in self.problems:
            kinds[pr["method"]] = kinds.get(pr["method"], 0) + 1
        return {"file": self.path.name, "lines": self.lines, "lines_dropped": self.dropped,
                "problems": kinds, "first_problems": self.problems[:20],
                "address_changes": sum(1 for r in self.netlink if r["type"] in ("RTM_NEWADDR", "RTM_DELADDR"))}

    def close(self) -> None:
        self.fh.close()


def _request(log: BrowserLog, p: dict[str, Any]) -> dict[str, Any]:
    log.urls[str(p.get("requestId"))] = str(p.get("request", {}).get("url", ""))
    return {"requestId": p.get("requestId"), "url": _text(p.get("request", {}).get("url")), "type": p.get("type"),
            "initiator": (p.get("initiator") or {}).get("type"), "timestamp": p.get("timestamp"),
            "redirect": bool(p.get("redirectResponse"))}


def _response(log: BrowserLog, p: dict[str, Any]) -> dict[str, Any]:
    r = p.get("response") or {}
    return {"requestId": p.get("requestId"), "url": _text(r.get("url")), "type": p.get("type"),
            "status": r.get("status"), "protocol": r.get("protocol"), "connectionId": r.get("connectionId"),
            "connectionReused": r.get("connectionReused"), "remotePort": r.get("remotePort"),
            "fromDiskCache": r.get("fromDiskCache"), "fromServiceWorker": r.get("fromServiceWorker"),
            "fromPrefetchCache": r.get("fromPrefetchCache"), "timestamp": p.get("timestamp")}


def _finished(log: BrowserLog, p: dict[str, Any]) -> dict[str, Any]:
    return {"requestId": p.get("requestId"), "url": log.urls.get(str(p.get("requestId"))),
            "encodedDataLength": p.get("encodedDataLength"), "timestamp": p.get("timestamp")}


def _failed(log: BrowserLog, p: dict[str, Any]) -> dict[str, Any]:
    return {"_problem": True, "requestId": p.get("requestId"), "url": log.urls.get(str(p.get("requestId"))),
            "type": p.get("type"), "errorText": p.get("errorText"), "canceled": p.get("canceled"),
            "blockedReason": p.get("blockedReason"), "timestamp": p.get("timestamp")}


def _exception(log: BrowserLog, p: dict[str, Any]) -> dict[str, Any]:
    d = p.get("exceptionDetails") or {}
    return {"_problem": True, "text": _text(d.get("text")), "url": d.get("url"), "line": d.get("lineNumber"),
            "column": d.get("columnNumber"), "context": d.get("executionContextId"),
            "description": _text((d.get("exception") or {}).get("description"))}


def _console(log: BrowserLog, p: dict[str, Any]) -> dict[str, Any]:
    frames = (p.get("stackTrace") or {}).get("callFrames") or [{}]
    return {"_problem": p.get("type") in ("error", "assert"), "type": p.get("type"),
            "args": [_arg(a) for a in (p.get("args") or [])[:8]], "context": p.get("executionContextId"),
            "url": frames[0].get("url"), "line": frames[0].get("lineNumber")}


def _entry(log: BrowserLog, p: dict[str, Any]) -> dict[str, Any]:
    e = p.get("entry") or {}
    return {"_problem": e.get("level") == "error", "source": e.get("source"), "level": e.get("level"),
            "text": _text(e.get("text")), "url": e.get("url"), "requestId": e.get("networkRequestId")}


def _context(log: BrowserLog, p: dict[str, Any]) -> dict[str, Any]:
    c = p.get("context") or {}
    return {"id": c.get("id"), "origin": c.get("origin"), "name": c.get("name"),
            "default": (c.get("auxData") or {}).get("isDefault")}


def _frame(log: BrowserLog, p: dict[str, Any]) -> dict[str, Any]:
    f = p.get("frame") or {}
    return {"frame": f.get("id"), "parent": f.get("parentId"), "url": _text(f.get("url"))}


_KEEP: dict[str, Callable[[BrowserLog, dict[str, Any]], dict[str, Any]]] = {
    "Network.requestWillBeSent": _request,
    "Network.responseReceived": _response,
    "Network.loadingFinished": _finished,
    "Network.loadingFailed": _failed,
    "Runtime.exceptionThrown": _exception,
    "Runtime.consoleAPICalled": _console,
    "Log.entryAdded": _entry,
    "Runtime.executionContextCreated": _context,
    "Runtime.executionContextDestroyed": lambda log, p: {"id": p.get("executionContextId")},
    "Runtime.executionContextsCleared": lambda log, p: {},
    "Page.frameNavigated": _frame,
    "Page.domContentEventFired": lambda log, p: {"timestamp": p.get("timestamp")},
    "Page.loadEventFired": lambda log, p: {"timestamp": p.get("timestamp")},
    "Inspector.targetCrashed": lambda log, p: {"_problem": True},
    "Inspector.detached": lambda log, p: {"_problem": True, "reason": p.get("reason")},
}


RTMGRP_LINK, RTMGRP_IPV4_IFADDR, RTMGRP_IPV6_IFADDR = 0x1, 0x10, 0x100
RTM_NAMES = {16: "RTM_NEWLINK", 17: "RTM_DELLINK", 20: "RTM_NEWADDR", 21: "RTM_DELADDR"}
IFA_ADDRESS, IFA_LOCAL, IFA_FLAGS = 1, 2, 8
IFA_F_TENTATIVE, IFA_F_DADFAILED = 0x40, 0x08
IFF_UP, IFF_RUNNING = 0x1, 0x40


def parse_rtnl(data: bytes) -> list[dict[str, Any]]:
    """Address and link messages of one rtnetlink datagram, in words: which interface, which address,
    whether it is still tentative (IPv6 duplicate-address detection running), the link's flags."""
    out: list[dict[str, Any]] = []
    off = 0
    while off + 16 <= len(data):
        length, mtype = struct.unpack_from("=IH", data, off)
        if length < 16:
            break
        body = data[off + 16: off + length]
        rec: dict[str, Any] = {"method": "netlink", "type": RTM_NAMES.get(mtype, str(mtype))}
        if mtype in (20, 21) and len(body) >= 8:
            family, prefixlen, flags, _scope, index = struct.unpack_from("=BBBBI", body)
            rec.update({"family": "inet6" if family == socket.AF_INET6 else "inet", "ifindex": index,
                        "prefixlen": prefixlen})
            attrs = _rtattrs(body[8:])
            raw = attrs.get(IFA_LOCAL) or attrs.get(IFA_ADDRESS)
            if raw is not None and len(raw) in (4, 16):
                rec["address"] = str(ipaddress.ip_address(raw))
            if IFA_FLAGS in attrs and len(attrs[IFA_FLAGS]) == 4:
                flags = struct.unpack("=I", attrs[IFA_FLAGS])[0]
            rec["tentative"] = bool(flags & IFA_F_TENTATIVE)
            rec["dadfailed"] = bool(flags & IFA_F_DADFAILED)
        elif mtype in (16, 17) and len(body) >= 16:
            _family, _pad, _type, index, flags, _change = struct.unpack_from("=BBHiII", body)
            name = _rtattrs(body[16:]).get(3, b"").rstrip(b"\0").decode(errors="replace")   # IFLA_IFNAME
            rec.update({"ifindex": index, "ifname": name, "up": bool(flags & IFF_UP),
                        "running": bool(flags & IFF_RUNNING)})
        else:
            rec = {}
        if rec:
            out.append(rec)
        off += (length + 3) & ~3
    return out


def _rtattrs(buf: bytes) -> dict[int, bytes]:
    attrs: dict[int, bytes] = {}
    off = 0
    while off + 4 <= len(buf):
        alen, atype = struct.unpack_from("=HH", buf, off)
        if alen < 4:
            break
        attrs[atype & 0x3FFF] = buf[off + 4: off + alen]
        off += (alen + 3) & ~3
    return attrs


class NetlinkWatch:
    """The browser's own namespace's address and link changes, as Chromium's network-change notifier
    sees them (it listens to the same rtnetlink groups), written into the BrowserLog as `netlink`
    lines: an address that appears or disappears while a page loads makes Chromium close its HTTP/2
    sessions with net::ERR_NETWORK_CHANGED (player/README.md, "dash.js in headless Chromium").
    A daemon thread; `stop` ends it. Started in the browser's namespace (the driver runs there)."""

    def __init__(self, log: BrowserLog) -> None:
        self.log = log
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self.sock.bind((0, RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR))
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="netlink-watch", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            ready, _, _ = select.select([self.sock], [], [], 0.2)
            if not ready:
                continue
            try:
                data = self.sock.recv(65536)
            except OSError:
                return
            t = time.monotonic_ns()
            for rec in parse_rtnl(data):
                self.log.write({"t_ns": t, **rec})

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=2)
        self.sock.close()


class Cdp:
    """A minimal DevTools-protocol session on one page target (websocket-client, synchronous). Every
    event that arrives while waiting for an answer goes to `on_event` (a BrowserLog), so nothing the
    browser reports between calls is lost; `drain` reads what came since without a call."""

    def __init__(self, ws_url: str, on_event: Callable[[dict[str, Any]], None] | None = None) -> None:
        import websocket   # websocket-client, pinned in requirements.txt
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.on_event = on_event

    def _dispatch(self, msg: dict[str, Any]) -> None:
        if "method" in msg and self.on_event is not None:
            self.on_event(msg)

    def call(self, method: str, params: dict[str, Any] | None = None, timeout_s: float = 30.0) -> dict[str, Any]:
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"DevTools {method}: {msg['error']}")
                return dict(msg.get("result", {}))
            self._dispatch(msg)
        raise TimeoutError(f"DevTools {method}: no answer in {timeout_s:g} s")

    def enable(self) -> None:
        """The domains whose events the BrowserLog keeps (before the page is navigated to)."""
        for domain in DOMAINS:
            self.call(domain)

    def drain(self, wait_s: float = 0.0) -> None:
        """Read events that arrived (for up to `wait_s` more) without sending anything."""
        import websocket
        deadline = time.monotonic() + wait_s
        while True:
            self.ws.settimeout(max(0.001, deadline - time.monotonic()))
            try:
                self._dispatch(json.loads(self.ws.recv()))
            except (websocket.WebSocketTimeoutException, TimeoutError):
                return

    def evaluate(self, expr: str, timeout_s: float = 30.0) -> Any:
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True},
                      timeout_s)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise RuntimeError(f"page: {d.get('exception', {}).get('description') or d.get('text')}")
        return r.get("result", {}).get("value")

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:   # the browser may already be gone
            pass
