// mpvlab's glue around dash.js (3.0.x API): settings from the driver, BBA and FESTIVE as custom ABR
// rules, and a record of dash.js's own events and metrics that the driver reads over the DevTools
// protocol. All times are performance.now() in ms (the driver maps them to the run's clock).
"use strict";
(function () {
  const rec = {
    events: [],        // [t_ms, name, detail]
    fragments: [],     // one per completed request dash.js made (media and init segments)
    buffer: [],        // [t_ms, buffer level s] sampled every 100 ms while playing
    decisions: [],     // custom rules' decisions with their inputs
    ended: false, error: null, started_ms: null, dashjs_version: null,
    start_gate: { start: "autoplay" },   // how the element was started (see startWhenDashjsKnowsItsBuffer)
    end_of_stream: null,                 // dash.js's buffering completed, and the page's recheck (recheckAtEndOfStream)
  };
  window.mpvlabRecord = rec;
  const now = () => performance.now();
  const ev = (name, detail) => rec.events.push([now(), name, detail === undefined ? null : detail]);

  // ---- BBA-0 (Huang et al., SIGCOMM 2014, §4): rate map from buffer level with reservoir r and
  // cushion c; switch up only when f(B) reaches the next higher rate, down only when it falls to
  // the next lower rate (the paper's Rate+ / Rate- hysteresis).
  function bbaChoose(p, levels, prev, bufferS) {
    const rmin = levels[0], rmax = levels[levels.length - 1];
    if (prev === null) return 0;
    const f = bufferS <= p.reservoir_s ? rmin
      : bufferS >= p.reservoir_s + p.cushion_s ? rmax
      : rmin + (rmax - rmin) * (bufferS - p.reservoir_s) / p.cushion_s;
    const up = Math.min(prev + 1, levels.length - 1), down = Math.max(prev - 1, 0);
    if (bufferS <= p.reservoir_s) return 0;
    if (bufferS >= p.reservoir_s + p.cushion_s) return levels.length - 1;
    if (f >= levels[up]) {          // highest rate strictly below f(B)
      let q = 0; for (let i = 0; i < levels.length; i++) if (levels[i] < f) q = i; return q;
    }
    if (f <= levels[down]) {        // lowest rate strictly above f(B)
      for (let i = 0; i < levels.length; i++) if (levels[i] > f) return i; return levels.length - 1;
    }
    return prev;
  }

  // ---- FESTIVE (Jiang, Sekar, Zhang, CoNEXT 2012, §5.2-5.3): harmonic mean of the last `window`
  // segment throughputs, gradual switching (up one level only after level+1 segments at the current
  // level, down one at once) and the delayed update by stability + alpha x efficiency score.
  // Same definitions as player/abr/festive.py. dash.js schedules requests itself, so FESTIVE's
  // randomised request times (§5.1) are not applied (stated in player/README.md).
  function festiveChoose(p, levels, history, prev, nowS, state) {
    if (prev === null || history.length === 0) return { q: 0, info: { w_bps: null } };
    const last = history.slice(-p.window);
    const w = last.length / last.reduce((a, h) => a + 1 / h.bps, 0);
    const aim = p.safety * w;
    const i = prev;
    let run = 0;
    for (let k = history.length - 1; k >= 0 && history[k].q === i; k--) run++;
    let bStar = 0; for (let k = 0; k < levels.length; k++) if (levels[k] <= aim) bStar = k;
    const ref = bStar > i ? (run >= i + 1 ? i + 1 : i) : (bStar < i ? i - 1 : i);
    const info = { w_bps: Math.round(w), b_star: bStar, b_ref: ref, run: run };
    if (ref === i) return { q: i, info: info };
    const n = state.switchTimes.filter((t) => t > nowS - p.switch_window_s).length;
    const denom = Math.min(aim, levels[ref]);
    const scoreCur = Math.pow(2, n) + p.alpha * Math.abs(levels[i] / denom - 1);
    const scoreRef = Math.pow(2, n + 1) + p.alpha * Math.abs(levels[ref] / denom - 1);
    Object.assign(info, { n_switches: n, score_cur: scoreCur, score_ref: scoreRef });
    if (scoreRef < scoreCur) { state.switchTimes.push(nowS); return { q: ref, info: info }; }
    return { q: i, info: info };
  }

  function customRule(name, params, player) {
    const state = { switchTimes: [] };
    function RuleClass() {
      const context = this.context;
      const SwitchRequest = dashjs.FactoryMaker.getClassFactoryByName("SwitchRequest");
      function getMaxIndex(rulesContext) {
        const mediaInfo = rulesContext.getMediaInfo();
        const req = SwitchRequest(context).create();
        if (mediaInfo.type !== "video") return req;
        const levels = rulesContext.getAbrController().getBitrateList(mediaInfo).map((b) => b.bitrate);
        const media = rec.fragments.filter((f) => f.type === "MediaSegment" && f.mediaType === "video" && f.ok);
        const prev = media.length ? media[media.length - 1].quality : null;
        const bufferS = player.getBufferLength("video") || 0;
        let q, info;
        if (name === "bba") { q = bbaChoose(params, levels, prev, bufferS); info = { buffer_s: bufferS }; }
        else {
          const hist = media.filter((f) => f.duration_ms > 0).map((f) => ({ q: f.quality, bps: f.bytes * 8000 / f.duration_ms }));
          const r = festiveChoose(params, levels, hist, prev, now() / 1000, state); q = r.q; info = r.info;
        }
        rec.decisions.push({ t_ms: now(), rule: name, quality: q, prev: prev, info: info });
        req.quality = q;
        req.reason = { rule: name };
        req.priority = SwitchRequest.PRIORITY.STRONG;
        return req;
      }
      return { getMaxIndex: getMaxIndex };
    }
    RuleClass.__dashjs_factory_name = name === "bba" ? "MpvlabBbaRule" : "MpvlabFestiveRule";
    return dashjs.FactoryMaker.getClassFactory(RuleClass);
  }

  // For tests/test_dashjs.py: the rules' decisions against player/abr's Python ones, same inputs.
  window.mpvlabRules = { bba: bbaChoose, festive: festiveChoose };

  const STRATEGY = { dynamic: "abrDynamic", bola: "abrBola", throughput: "abrThroughput" };

  // Passive view of the SourceBuffers dash.js creates (listeners only; nothing dash.js sees changes):
  // each append's end with the SourceBuffer's own ranges, so a stall can be set beside what the media
  // element held and what dash.js believed its buffer level was (player README, "Start-up stall").
  const sourceBuffers = [];
  const ranges = (tr) => { const b = []; for (let i = 0; i < tr.length; i++) b.push([tr.start(i), tr.end(i)]); return b; };
  const origAddSourceBuffer = MediaSource.prototype.addSourceBuffer;
  MediaSource.prototype.addSourceBuffer = function (mime) {
    const sb = origAddSourceBuffer.call(this, mime);
    sourceBuffers.push(sb);
    sb.addEventListener("updateend", () => {
      let b = null;
      try { b = ranges(sb.buffered); } catch (err) { /* source buffer removed */ }
      ev("sb.updateend", { mime: mime, buffered: b });
    });
    return sb;
  };
  rec.snapshot = function (video, player) {
    let sbs = [];
    try { sbs = sourceBuffers.map((sb) => ({ updating: sb.updating, buffered: ranges(sb.buffered) })); } catch (err) { sbs = String(err); }
    let level = null;
    try { level = player.getBufferLength("video"); } catch (err) { level = String(err); }
    return { t_media: video.currentTime, ready_state: video.readyState, playback_rate: video.playbackRate,
             paused: video.paused, buffered: ranges(video.buffered), source_buffers: sbs, dashjs_buffer_level_s: level };
  };
  // dash.js's buffer settings exactly as configured (player README, "dash.js's buffer settings"):
  // each of cfg's keys is a dash.js `streaming` setting in seconds; nothing else of `streaming` but
  // the ABR is changed. What dash.js then holds is read back from getSettings() into the record
  // (settings_read_back), which the driver compares with what it sent.
  function applySettings(player, settings, abr) {
    const streaming = Object.assign({}, settings, { abr: abr });
    player.updateSettings({ debug: { logLevel: dashjs.Debug.LOG_LEVEL_WARNING }, streaming: streaming });
    const held = player.getSettings().streaming;
    rec.settings_read_back = {};
    for (const k of Object.keys(settings)) rec.settings_read_back[k] = held[k] === undefined ? null : held[k];
    return rec.settings_read_back;
  }
  window.mpvlabApplySettings = applySettings;   // tests/test_dashjs.py reads settings back in Chromium

  window.mpvlabStart = function (cfg) {
    rec.started_ms = now();
    const video = document.getElementById("v");
    const player = dashjs.MediaPlayer().create();
    rec.dashjs_version = player.getVersion();
    const custom = cfg.abr === "bba" || cfg.abr === "festive";
    applySettings(player, cfg.settings, custom ? { useDefaultABRRules: false }
      : { ABRStrategy: STRATEGY[cfg.abr], useDefaultABRRules: true });
    if (custom) player.addABRCustomRule("qualitySwitchRules", cfg.abr === "bba" ? "MpvlabBbaRule" : "MpvlabFestiveRule",
                                        customRule(cfg.abr, cfg.abr_params, player));
    const E = dashjs.MediaPlayer.events;
    player.on(E.FRAGMENT_LOADING_COMPLETED, (e) => {
      const r = e.request;
      const t0 = r.requestStartDate ? r.requestStartDate.getTime() : null;
      const tfb = r.firstByteDate ? r.firstByteDate.getTime() : null;
      const tend = r.requestEndDate ? r.requestEndDate.getTime() : null;
      // Dates are wall clock (ms); kept relative to the request start plus the wall→now() offset.
      const wallToNow = now() - Date.now();
      rec.fragments.push({
        t_ms: now(), mediaType: r.mediaType, type: r.type, url: r.url, index: r.index, quality: r.quality,
        start_s: r.startTime, media_duration_s: r.duration, bytes: r.bytesLoaded || 0, bytes_total: r.bytesTotal || 0,
        request_ms: t0 === null ? null : t0 + wallToNow, first_byte_ms: tfb === null ? null : tfb + wallToNow,
        end_ms: tend === null ? null : tend + wallToNow,
        ttfb_ms: t0 !== null && tfb !== null ? tfb - t0 : null,
        duration_ms: t0 !== null && tend !== null ? tend - t0 : null,
        ok: !e.error, error: e.error ? String(e.error.message || e.error.code || e.error) : null,
      });
    });
    for (const name of ["PLAYBACK_STARTED", "PLAYBACK_PLAYING", "PLAYBACK_WAITING", "PLAYBACK_STALLED",
                        "PLAYBACK_PAUSED", "PLAYBACK_ENDED", "BUFFER_EMPTY", "BUFFER_LOADED",
                        "QUALITY_CHANGE_REQUESTED", "QUALITY_CHANGE_RENDERED", "STREAM_INITIALIZED"]) {
      player.on(E[name], (e) => {
        let detail = e && (e.newQuality !== undefined
          ? { old: e.oldQuality, new: e.newQuality, type: e.mediaType } : (e.mediaType ? { type: e.mediaType } : null));
        // At a buffer state change: what the element, the SourceBuffer and dash.js each held.
        if (name === "BUFFER_EMPTY" || name === "BUFFER_LOADED") {
          detail = Object.assign({}, detail, rec.snapshot(video, player));
          if (e && e.mediaType === "video") dashjsVideoBufferState = name === "BUFFER_EMPTY" ? "empty" : "loaded";
        }
        ev(name, detail);
      });
    }
    // dash.js's internal end-of-stream events (its event bus; MediaPlayer.on subscribes to any name):
    // the last request's COMPLETE (streamCompleted) and its BufferController's isBufferingCompleted
    // (bufferingCompleted), so the record shows when dash.js learnt the stream was fully buffered.
    for (const name of ["streamCompleted", "bufferingCompleted"]) {
      player.on(name, (e) => {
        const type = name === "streamCompleted" ? (e && e.request && e.request.mediaType)
          : (e && e.sender && e.sender.getType ? e.sender.getType() : null);
        ev("dashjs." + name, Object.assign({ type: type, index: e && e.request ? e.request.index : null }, rec.snapshot(video, player)));
        if (name === "bufferingCompleted" && type === "video") recheckAtEndOfStream(cfg.end_of_stream, video, player);
      });
    }
    player.on(E.ERROR, (e) => { rec.error = JSON.stringify(e.error || e).slice(0, 500); ev("ERROR", rec.error); });
    player.on(E.PLAYBACK_ENDED, () => { rec.ended = true; });
    // The <video> element's own view: first frame, waiting/playing (stalls), dropped frames.
    // progress and ratechange too: dash.js re-judges its buffer on each (see recheckAtEndOfStream);
    // isTrusted tells the element's own events from the page's end-of-stream recheck.
    for (const name of ["loadeddata", "playing", "waiting", "stalled", "seeking", "seeked", "ended", "error",
                        "progress", "ratechange", "suspend"]) {
      video.addEventListener(name, (e) => {
        ev("video." + name, Object.assign({ trusted: e.isTrusted }, rec.snapshot(video, player)));
      });
    }
    setInterval(() => {
      if (rec.started_ms !== null) rec.buffer.push([now(), player.getBufferLength("video") || 0, video.currentTime]);
    }, 100);
    rec.player = player;
    const gated = cfg.start === "gated";
    player.initialize(video, cfg.mpd_url, !gated);
    if (gated) startWhenDashjsKnowsItsBuffer(player, video);
    return rec.dashjs_version;
  };

  // End-of-stream recheck (player README, "Halt after the last segment"). dash.js 3.0.3 resumes a
  // playback it halted (BUFFER_EMPTY, playbackRate 0) only when its BufferController re-judges the
  // buffer (checkIfSufficientBuffer: BUFFER_LOADED once isBufferingCompleted or the level reaches the
  // MPD's minBufferTime), and it re-judges only on the element's progress/timeupdate/ratechange/
  // stalled, on dash.js's own playing, and after a media append. Its STREAM_COMPLETED handler sets
  // isBufferingCompleted without re-judging. When that comes after the last media append (an ABR
  // switch after the last segment fetches an init segment first) and after the element's last
  // `progress` (none follow once nothing more loads; a halted element fires no timeupdate), nothing
  // re-judges: playback never resumes although every frame is in the element. "recheck" (default)
  // dispatches one `progress` event on the element when dash.js reports buffering completed while
  // it holds the element halted, the event on which dash.js itself re-judges; "stock" leaves
  // dash.js as it is. dash.js is not patched; each recheck is recorded (rec.end_of_stream).
  let dashjsVideoBufferState = null;   // the last BUFFER_EMPTY / BUFFER_LOADED dash.js raised for video
  function recheckAtEndOfStream(mode, video, player) {
    const at = { mode: mode, buffering_completed_ms: now(), dashjs_state: dashjsVideoBufferState, recheck_ms: null };
    rec.end_of_stream = at;
    if (mode !== "recheck" || dashjsVideoBufferState !== "empty") return;
    // after dash.js's STREAM_COMPLETED handler has returned (it is the caller)
    setTimeout(() => {
      at.recheck_ms = now();
      ev("mpvlab.end_of_stream_recheck", rec.snapshot(video, player));
      video.dispatchEvent(new Event("progress"));
    }, 0);
  }

  // Start gate (player README, "Start-up stall with a full buffer"). With dash.js's own autoplay the
  // element may fire `playing` before dash.js has seen the first append end; dash.js's `playing`
  // handler then judges a stale buffer level (0 s) against STALL_THRESHOLD, raises BUFFER_EMPTY and
  // halts the element (playbackRate 0) although it holds seconds of video. Gated, dash.js is
  // initialised without autoplay and the page calls player.play() once dash.js's own level
  // (getBufferLength, what that check reads) has reached START_LEVEL_S: the check then sees the
  // level the element really holds. dash.js itself is unchanged; the gate's timing is recorded
  // (rec.start_gate, event mpvlab.start_gate) so its cost in start-up delay is visible.
  const START_LEVEL_S = 0.5;   // dash.js 3.0.3's STALL_THRESHOLD (BufferController; a constant there)
  function startWhenDashjsKnowsItsBuffer(player, video) {
    const gate = { start: "gated", element_can_play_ms: null, opened_ms: null, dashjs_level_s: null };
    rec.start_gate = gate;
    const iv = setInterval(() => {
      if (gate.element_can_play_ms === null && video.readyState >= 3) gate.element_can_play_ms = now();
      let level = 0;
      try { level = player.getBufferLength("video") || 0; } catch (err) { /* not initialised yet */ }
      const b = video.buffered;
      // the whole (short) video appended: nothing more will raise the level
      const whole = b.length > 0 && isFinite(video.duration) && b.end(b.length - 1) >= video.duration - 0.05;
      if (level >= START_LEVEL_S || (whole && level > 0)) {
        clearInterval(iv);
        gate.opened_ms = now();
        gate.dashjs_level_s = level;
        ev("mpvlab.start_gate", Object.assign({}, gate, rec.snapshot(video, player)));
        player.play();
      }
    }, 10);
  }

  // The driver polls this (small) and reads the full record once at the end.
  window.mpvlabState = function () {
    const v = document.getElementById("v");
    const q = v.getVideoPlaybackQuality ? v.getVideoPlaybackQuality() : null;
    return { ended: rec.ended, error: rec.error, t_media: v.currentTime, fragments: rec.fragments.length,
             dropped: q ? q.droppedVideoFrames : null, total: q ? q.totalVideoFrames : null };
  };
  window.mpvlabDump = function () {
    const v = document.getElementById("v");
    const q = v.getVideoPlaybackQuality ? v.getVideoPlaybackQuality() : null;
    const out = Object.assign({}, rec);
    delete out.player;
    delete out.snapshot;
    out.playback_quality = q ? { dropped: q.droppedVideoFrames, total: q.totalVideoFrames } : null;
    out.bitrates = rec.player ? rec.player.getBitrateInfoListFor("video").map((b) => ({ q: b.qualityIndex, bps: b.bitrate, w: b.width, h: b.height })) : [];
    try {
      const dm = rec.player.getDashMetrics();
      out.http_requests = (dm.getHttpRequests ? dm.getHttpRequests("video") : []).map((r) => ({
        url: r.url, type: r.type, status: r.responsecode, trequest: r.trequest && r.trequest.getTime(),
        tresponse: r.tresponse && r.tresponse.getTime(), tfinish: r._tfinish && r._tfinish.getTime(),
        quality: r._quality, interval_ms: r.interval, trace: (r.trace || []).map((t) => ({ s: t.s && t.s.getTime(), d: t.d, b: t.b })),
      }));
      out.throughput_estimates_kbps = rec.throughput_estimates;
    } catch (err) { out.http_requests_error = String(err); }
    out.codec_support = {
      "avc1.42c01e": MediaSource.isTypeSupported('video/mp4; codecs="avc1.42c01e"'),
      "avc1.64001f": MediaSource.isTypeSupported('video/mp4; codecs="avc1.64001f"'),
      "vp09.00.10.08": MediaSource.isTypeSupported('video/mp4; codecs="vp09.00.10.08"'),
    };
    return JSON.stringify(out);
  };
  // dash.js's own throughput estimate (the ABR's input), sampled with the buffer.
  rec.throughput_estimates = [];
  setInterval(() => {
    if (rec.player) {
      try { rec.throughput_estimates.push([now(), rec.player.getAverageThroughput("video")]); } catch (err) { /* before init */ }
    }
  }, 500);
})();
