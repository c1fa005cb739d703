"""The GStreamer player's pipeline (mpvlab/player/gstreamer/player.py, whose module doc says why each element
and setting): the source (souphttpsrc, dashdemux's, or our own DASH client's appsrc), the playout
queue, the decoder and the sink, linked and their callbacks connected; every HTTP source given the
--ca-file trust store."""

from __future__ import annotations

from typing import Any

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

from mpvlab.player.gstreamer import dash  # noqa: E402
from mpvlab.player.gstreamer.player_bus import BusWatch  # noqa: E402


class PipelineBuilder(BusWatch):
    """Makes the pipeline (`_build`, called once as the Player is made)."""

    @staticmethod
    def _make(factory: str, name: str, **props: Any) -> Gst.Element:
        el = Gst.ElementFactory.make(factory, name)
        if el is None:
            raise RuntimeError(f"GStreamer element '{factory}' is not available "
                               "(packages gstreamer1.0-plugins-good/-libav)")
        for k, v in props.items():
            el.set_property(k, v)
        return el

    def _build(self) -> Gst.Pipeline:
        a = self.a
        p = Gst.Pipeline.new("mpvlab-player")
        if self.own_client:
            from mpvlab.player.gstreamer import dash_client
            assert isinstance(self.dash, dash_client.ClientSession)
            self.src = self.dash.build(p, self._make)
        else:
            self.src = self._make("souphttpsrc", "src", location=a.url, retries=a.http_retries)
            self._trust(self.src)
        # dashdemux creates its segment sources itself: give each the same trust store
        # when it joins the pipeline (before it starts, so before its session opens).
        p.connect("deep-element-added", self._on_deep_element)
        if self.dash is None:
            self.demux = self._make("qtdemux", "demux")
        self.queue = self._make("queue", "playout",
                                max_size_time=int(a.buffer_ms * Gst.MSECOND),
                                max_size_bytes=0, max_size_buffers=0)
        self.sink = self._make("fakesink", "sink", sync=True, qos=True,
                               max_lateness=int(a.max_lateness_ms * Gst.MSECOND),
                               signal_handoffs=True, enable_last_sample=False, **{"async": True})
        chain: list[Gst.Element] = [self.queue]
        if not a.no_decode:
            # QoS off: see module doc (false discards from the decoder's own QoS).
            self.dec = self._make("avdec_h264", "dec", qos=False)
            chain.append(self.dec)
        chain.append(self.sink)
        if self.client is not None:
            # appsrc -> qtdemux, both added by ClientSession.build
            for el in chain:
                p.add(el)
            self.demux = self.client.qtdemux
        elif isinstance(self.dash, dash.DashSession):
            # souphttpsrc(MPD) -> dashdemux -> qtdemux (see dash.py)
            for el in [self.src, *chain]:
                p.add(el)
            self.dash.build(p, self.src, self._make)
            self.demux = self.dash.qtdemux
        else:
            for el in [self.src, self.demux, *chain]:
                p.add(el)
            if not self.src.link(self.demux):
                raise RuntimeError("cannot link souphttpsrc to qtdemux")
        for up, down in zip(chain, chain[1:]):
            if not up.link(down):
                raise RuntimeError(f"cannot link {up.get_name()} to {down.get_name()}")
        self.demux.connect("pad-added", self._on_pad_added)
        self.queue.connect("underrun", self._on_underrun)
        self.queue.connect("running", self._on_running)
        self.sink.connect("handoff", self._on_handoff)
        self.src.get_static_pad("src").add_probe(Gst.PadProbeType.BUFFER, self._on_src_buffer)
        self.queue.get_static_pad("sink").add_probe(Gst.PadProbeType.EVENT_DOWNSTREAM,
                                                    self._on_queue_event)
        bus = p.get_bus()
        bus.add_signal_watch()
        bus.connect("message", self._on_message)
        return p

    def _trust(self, el: Gst.Element) -> None:
        if self.tls_db is not None:
            el.set_property("tls-database", self.tls_db)
            with self.lock:
                self.http_sources += 1

    def _on_deep_element(self, _bin: Gst.Bin, _sub: Gst.Bin, el: Gst.Element) -> None:
        fac = el.get_factory()
        if fac is not None and fac.get_name() == "souphttpsrc" and el is not self.src:
            self._trust(el)
