"""The rtp workload's loss repair (NACK/RTX, PLI; rtp/README.md "Losses were repaired"): the summary's
`rtp.repair` from both ends' counts, and the accounting that fails a run when they do not add up."""

from __future__ import annotations

from typing import Any

from mpvlab.core.errors import RunFailed


def repair_record(tx: dict[str, Any], rx: dict[str, Any], sender_frames: list[dict[str, str]]) -> dict[str, Any]:
    """The summary's `rtp.repair`: the sender's NACK/PLI handling and the viewer's requests and
    retransmissions received (sender.json and receiver.json `repair`), key frames per cause."""
    s, r = tx["repair"], rx["repair"]
    c = s["counts"]
    keys = [f for f in sender_frames if f["keyframe"] == "true"]
    return {
        "nack": s["nack"], "pli": s["pli"],
        "nack_messages_sent": r["nack_messages_sent"], "nacked_packets": r["nacked_packets"],
        "nack_gave_up": r["nack_gave_up"], "nack_rtt_ms": r["nack_rtt_ms"],
        "nack_messages_received": c["nack_messages_received"], "nacked_packets_received": c["nacked_packets"],
        "resend_not_in_history": c["resend_not_in_history"], "resend_refused_too_soon": c["resend_refused_too_soon"],
        "resend_rate_limited": c.get("resend_rate_limited", 0),
        "retransmissions_sent": c["retransmissions_sent"], "retransmission_bytes_sent": c["retransmission_bytes_sent"],
        "retransmissions_unsent_at_end": c["retransmissions_unsent_at_end"],
        "retransmissions_received": r["rtx_packets_received"], "retransmission_bytes_received": r["rtx_bytes_received"],
        "retransmissions_lost": r["rtx_packets_lost"],
        "retransmissions_in_time": r["repaired_in_time"], "retransmissions_too_late": r["repaired_too_late"],
        "retransmissions_duplicate": r["rtx_duplicate"],
        "packets_repaired": r["packets_repaired"], "packets_lost_unrepaired": r["packets_lost_unrepaired"],
        "frames_repaired": r["frames_repaired"], "frames_repaired_on_time": r["frames_repaired_on_time"],
        "pli_sent": r["pli_sent"], "pli_sent_by_reason": r["pli_sent_by_reason"], "pli_received": c["pli_received"],
        "keyframe_requests_to_encoder": c["keyframe_requests_to_encoder"],
        "keyframe_requests_rate_limited": c["keyframe_requests_rate_limited"],
        "keyframes": len(keys), "keyframes_forced": c["keyframes_forced"],
        "definition": r["definition"],
    }


def check_repair(tx: dict[str, Any], rx: dict[str, Any]) -> None:
    """Retransmissions (RTX) are accounted like the video, apart from it: every one sent was received
    or counted lost (the end record names how many), every one received filled a gap or was a
    duplicate, and every media packet lost was repaired or stays lost."""
    c, r = tx["repair"]["counts"], rx["repair"]
    sent = c["retransmissions_sent"]
    if r["rtx_packets_expected"] != sent or r["rtx_packets_received"] + r["rtx_packets_lost"] != sent:
        raise RunFailed(f"rtp: {sent} retransmissions sent, the viewer expected {r['rtx_packets_expected']} "
                        f"and received {r['rtx_packets_received']}")
    if r["rtx_packets_received"] != r["packets_repaired"] + r["rtx_duplicate"]:
        raise RunFailed(f"rtp: {r['rtx_packets_received']} retransmissions received, not the {r['packets_repaired']} "
                        f"that repaired a packet + {r['rtx_duplicate']} duplicates")
    if r["packets_repaired"] + r["packets_lost_unrepaired"] != rx["packets_lost"]:
        raise RunFailed(f"rtp: {rx['packets_lost']} packets lost, not {r['packets_repaired']} repaired + "
                        f"{r['packets_lost_unrepaired']} unrepaired")
