"""The rtp part's records and the DASH representations are typed (issue 46, "a typed summary"): the
decoder's account, the BBR variant, the latency percentiles, the TWCC feedback ledger, the target
bitrate, the per-second series, each cross-check and each representation are models, built where the
runner makes them, so a wrong key or a wrong type from a producer (mpvlab-rtp's JSON, the decoder's
`end` line, a player's summary) fails at that line naming the part and the field."""

from __future__ import annotations

import copy
import traceback
import typing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mpvlab.core.errors import MpvlabError
from mpvlab.results.summary_parts.base import build
from mpvlab.results.summary_parts.workload import RtpBbrVariant, RtpRecord
from mpvlab.runner import crosschecks
from mpvlab.runner.workloads import video
from mpvlab.runner.workloads.rtp import rtp_record
from mpvlab.workloads.rtp import RtpWorkloadSpec, WebrtcBbrVariant
from test_rtp_checks import _stream, _write

# what live_decoder.py writes on its `end` line (its main: drain's keys, then the counts)
DECODER_END = {"warnings": 0, "warning_texts": [], "error": None, "fed": 0, "pictures": 0, "refused": 0,
               "cpu_s": 0.779, "decoder": "vp8dec 1.22.0"}


def _ctx(bbr: dict[str, Any] | None = None) -> Any:
    spec = RtpWorkloadSpec(kind="rtp", controller="webrtc-bbr", encoder="vp8", bbr=bbr)
    return SimpleNamespace(scenario=SimpleNamespace(workload=spec), extra_prov={})


def _make(tmp_path: Path, stream: dict[str, Any], bbr: dict[str, Any] | None = None) -> dict[str, Any]:
    _write(tmp_path, stream)
    record, _, _ = rtp_record(_ctx(bbr), stream["tx"], stream["rx"], tmp_path)
    return record


def _raised_at(e: pytest.ExceptionInfo[MpvlabError], where: str) -> None:
    """Raised from the producer's own line (the frame that called build), not at the end of the run."""
    frames = traceback.extract_tb(e.value.__traceback__)
    callers = [f for f in frames if not f.filename.endswith("summary_parts/base.py")]
    assert callers and Path(callers[-1].filename).as_posix().endswith(where), [f.filename for f in frames]


def test_a_real_shaped_stream_builds_and_is_written_unchanged(tmp_path: Path) -> None:
    """The stream as mpvlab-rtp logs it, with a decoder account and a BBR variant: every typed record
    fits, and the part returned is the dict made (the model checks, it never rewrites)."""
    stream = _stream()
    stream["rx"]["decode"]["decoder"] = dict(DECODER_END, fed=stream["tx"]["frames_captured"])
    record = _make(tmp_path, stream, bbr={"filter": "non-replacing", "probe_rtt": "v2"})
    assert record["bbr_variant"] == {"filter": "non-replacing", "estimate": "best", "recovery": True,
                                     "probe_rtt": "v2", "padding": True}
    assert record["decode"]["decoder"] is stream["rx"]["decode"]["decoder"]
    assert record["latency_ms"] is stream["rx"]["latency_ms"]
    assert record["encoder_per_second"][0] == {"t_s": 1.0, "frames": 10, "achieved_bps": 480_000,
                                               "achieved_wire_bps": 480_000 + 10 * 40 * 8,
                                               "target_bps": 480_000.0, "encoder_set_bps": 480_000.0}
    assert set(record["received_per_second"][0]) == {"second", "received_bps", "padding_bps", "audio_bps"}
    # the call's audio, apart from the video: the stream's logs carry it (tests/test_rtp_checks.py)
    assert record["audio"]["enabled"] and record["audio"]["packets_sent"] == stream["tx"]["audio"]["packets_sent"] > 0


# (what the producer wrote wrong, as a change of the stream's logs; the field the error names; the words)
WRONG: list[tuple[str, Any, str, str]] = [
    ("an extra latency percentile", lambda s: s["rx"]["latency_ms"].update(p999=60.0),
     "latency_ms.p999", "Extra inputs are not permitted"),
    ("a latency that is not a number", lambda s: s["rx"]["latency_ms"].update(p50="fast"),
     "latency_ms.p50", "valid number"),
    ("the decoder's account without its counts", lambda s: s["rx"]["decode"].update(
        decoder={k: v for k, v in DECODER_END.items() if k != "pictures"}), "decode.decoder.pictures", "Field required"),
    ("the decoder's account with a count in words", lambda s: s["rx"]["decode"].update(
        decoder=dict(DECODER_END, fed="all")), "decode.decoder.fed", "valid integer"),
    ("a feedback ledger a field short", lambda s: s["tx"]["feedback"].pop("rtcp_bytes"),
     "feedback.rtcp_bytes", "Field required"),
    ("a feedback ledger with a renamed field", lambda s: s["tx"]["feedback"].update(
        rtcp_packets=s["tx"]["feedback"].pop("rtcp_datagrams")), "feedback.rtcp_packets", "Extra inputs"),
    ("a feedback interval in seconds", lambda s: s["rx"].update(feedback_interval_ms=0.05),
     "feedback.interval_ms", "valid integer"),
    ("no count of target updates", lambda s: s["tx"].update(target_updates=None), "target_bps.updates", "valid integer"),
    ("a final target with a fraction", lambda s: s["tx"].update(final_target_bps=480_000.5),
     "target_bps.final", "valid integer"),
]


@pytest.mark.parametrize("what, change, field, words", WRONG, ids=[w[0] for w in WRONG])
def test_a_wrong_log_fails_where_the_rtp_part_is_made(tmp_path: Path, what: str, change: Any, field: str,
                                                      words: str) -> None:
    stream = _stream()
    change(stream)
    with pytest.raises(MpvlabError) as e:
        _make(tmp_path, stream)
    msg = str(e.value)
    assert msg.startswith("summary part rtp (RtpRecord): "), msg
    assert f"{field}: " in msg and words in msg, msg
    _raised_at(e, "mpvlab/runner/workloads/rtp.py")


@pytest.mark.parametrize("where, change, field, words", [
    ("encoder_per_second", lambda r: r.update(target_mbps=0.48), "encoder_per_second.2.target_mbps", "Extra inputs"),
    ("encoder_per_second", lambda r: r.update(frames=None), "encoder_per_second.2.frames", "valid integer"),
    ("received_per_second", lambda r: r.pop("padding_bps"), "received_per_second.2.padding_bps", "Field required"),
    ("received_per_second", lambda r: r.update(second=2.5), "received_per_second.2.second", "fractional part"),
])
def test_a_wrong_row_of_a_per_second_series_is_named(tmp_path: Path, where: str, change: Any, field: str,
                                                    words: str) -> None:
    """rtp.py parses each row from its CSV into fixed keys; a row of another shape (a change of that
    code) fails the build, naming the row's index and key."""
    record = copy.deepcopy(_make(tmp_path, _stream()))
    assert build(RtpRecord, "rtp", record) is record
    change(record[where][2])
    with pytest.raises(MpvlabError) as e:
        build(RtpRecord, "rtp", record)
    assert f"summary part rtp (RtpRecord): {field}: " in str(e.value) and words in str(e.value), str(e.value)


def test_the_summary_names_every_bbr_variant_field_as_the_scenario_does() -> None:
    """bbr_variant is the scenario's WebrtcBbrVariant written out (model_dump): a field added there
    fails here, not a run's build."""
    spec = WebrtcBbrVariant.model_fields
    summary = RtpBbrVariant.model_fields
    assert list(summary) == list(spec)
    for name, f in summary.items():
        assert typing.get_args(f.annotation) == typing.get_args(spec[name].annotation) or \
            f.annotation == spec[name].annotation, name
    assert build(RtpBbrVariant, "rtp.bbr_variant", WebrtcBbrVariant().model_dump()) is not None
    with pytest.raises(MpvlabError, match=r"rtp.bbr_variant \(RtpBbrVariant\): estimate: Input should be 'best' or "
                                          r"'third-best'"):
        build(RtpBbrVariant, "rtp.bbr_variant", dict(WebrtcBbrVariant().model_dump(), estimate="second-best"))


def _check(**over: Any) -> dict[str, Any]:
    return {"ok": True, "figure": "rtp.latency_ms (p50, p95, p99, max)", "tolerance": "±0.001 ms",
            "evidence": "receiver/frames.csv latency_ms of every complete frame", "frames": 600, **over}


@pytest.mark.parametrize("record, field, words", [
    (_check(figure=3), "figure", "valid string"),
    ({k: v for k, v in _check().items() if k != "tolerance"}, "tolerance", "Field required"),
    (_check(ok="perhaps"), "ok", "valid boolean"),
])
def test_a_wrong_rtp_check_record_fails_where_the_checks_go_into_the_summary(record: dict[str, Any], field: str,
                                                                            words: str) -> None:
    summary: dict[str, Any] = {"rtp": {"checks": {}}, "warnings": []}
    result = crosschecks.Result(records={"rtp.checks": {"latency_vs_frames": record}})
    with pytest.raises(MpvlabError) as e:
        crosschecks.apply(summary, {}, result, lambda _m: None)
    msg = str(e.value)
    assert msg.startswith(f"summary part rtp.checks.latency_vs_frames (RtpCheck): {field}: "), msg
    assert words in msg, msg
    _raised_at(e, "mpvlab/runner/crosschecks.py")


def test_an_rtp_check_keeps_its_own_numbers() -> None:
    """Open: each check's own keys are kept as made (the model names the four every check has)."""
    summary: dict[str, Any] = {"rtp": {"checks": {}}, "warnings": []}
    made = {"latency_vs_frames": _check(differing={})}
    crosschecks.apply(summary, {}, crosschecks.Result(records={"rtp.checks": made}), lambda _m: None)
    assert summary["rtp"]["checks"] is made


# the representations as the players record them: the GStreamer players from the MPD
# (mpvlab/player/gstreamer/dash.py, dash_client.py), dash.js from its bitrate list (dashjs/qoe.py)
GST_REPS = [{"level": 0, "id": "v0", "bitrate_bps": 1_000_000, "width": 640, "height": 360},
            {"level": 1, "id": "v1", "bitrate_bps": 2_500_000, "width": 1280, "height": 720}]
DASHJS_REPS = [{"level": 0, "bitrate_bps": 1_000_000}, {"level": 1, "bitrate_bps": 2_500_000}]


def _dash_player(reps: Any) -> dict[str, Any]:
    return {"dash": True, "representations": reps, "segments": [], "segment_s": 2.0}


@pytest.mark.parametrize("reps", [GST_REPS, DASHJS_REPS, None], ids=["gstreamer", "dashjs", "none"])
def test_the_players_representations_build(reps: Any) -> None:
    view = video.player_view(_dash_player(reps))
    assert view["dash"]["representations"] is reps


@pytest.mark.parametrize("reps, field, words", [
    ([dict(GST_REPS[0], codec="avc1")], "dash.representations.0.codec", "Extra inputs are not permitted"),
    ([{"level": 0}], "dash.representations.0.bitrate_bps", "Field required"),
    ([dict(DASHJS_REPS[1], bitrate_bps=2.5e6 + 0.5)], "dash.representations.0.bitrate_bps", "fractional part"),
    ({"v0": 1_000_000}, "dash.representations", "valid list"),
])
def test_a_wrong_representation_fails_where_the_player_qoe_is_made(reps: Any, field: str, words: str) -> None:
    with pytest.raises(MpvlabError) as e:
        video.player_view(_dash_player(reps))
    msg = str(e.value)
    assert msg.startswith("summary part player QoE (PlayerQoE): "), msg
    assert f"{field}: " in msg and words in msg, msg
    _raised_at(e, "mpvlab/runner/workloads/video.py")
