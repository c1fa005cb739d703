"""The pandas-free flow readers (mpvlab/results/flow_ids.py) name exactly the flows the pandas readers
(flows.read_state, flows.sched_flows) name on the same files, so a run without a CC state model
records the same flows.json / flows.csv as one with (both write through flow_ids.write_flow_index)."""

from __future__ import annotations

import math
from pathlib import Path

from mpvlab.cc.registry import KERNEL_BBR_STATE
from mpvlab.results import flow_ids, flows

RULES = flow_ids.RoleRules(80, frozenset({40200}))
SS_HEADER = "t_s,local,peer,cc,mptcp,cwnd,bbr_bw_bps,bbr_min_rtt_ms,mptcp_token,bbr_pacing_gain,bbr_mode\n"
SCHED_HEADER = "t,source,conn,subflow_id,subflow,tcp_state\n"


def _write(tmp_path: Path, ss: str, sched: str) -> Path:
    data = tmp_path / "data"
    (data / "schedtrace").mkdir(parents=True)
    (data / "subflows.csv").write_text(ss)
    (data / flow_ids.SCHED_SAMPLES).write_text(sched)
    return data


def _both(data: Path, tmp_path: Path) -> tuple[tuple[str, str], tuple[str, str]]:
    series = {"subflows.csv": flows.read_state(data / "subflows.csv", KERNEL_BBR_STATE, RULES, None),
              flows.SCHED_SAMPLES: flows.sched_flows(data / flows.SCHED_SAMPLES, RULES)}
    flows.write_flows(data, RULES, series, flows.mptcp_tokens(data))
    by_pandas = ((data / "flows.json").read_text(), (data / "flows.csv").read_text())
    names = {flow_ids.SS_SAMPLES: flow_ids.ss_flow_times(data / flow_ids.SS_SAMPLES, RULES),
             flow_ids.SCHED_SAMPLES: flow_ids.sched_flow_times(data / flow_ids.SCHED_SAMPLES, RULES)}
    flow_ids.write_flow_index(data, RULES, flow_ids.flow_index(names, flow_ids.mptcp_tokens(data)))
    return by_pandas, ((data / "flows.json").read_text(), (data / "flows.csv").read_text())


def test_same_files_as_the_pandas_readers(tmp_path: Path) -> None:
    ss = SS_HEADER + "".join([
        "0.2762,10.0.100.1:80,10.0.1.2:58602,cubic,1,24,,,acb4e316,,\n",
        "0.5,10.0.100.1:80,10.0.2.2:40000,cubic,1,10,,,acb4e316,,\n",
        "0.51,10.0.100.1:80,10.0.1.2:40200,cubic,1,10,,,,,\n",              # the preflight: a check
        "nan,10.0.100.1:80,10.0.1.2:58602,cubic,1,24,,,acb4e316,,\n",      # no time: left out
        "\n",
        "1.23456,[::ffff:10.0.100.1]:80,[::ffff:10.0.1.2]:58602,cubic,1,30,,,acb4e316,,\n",
        "1.5,127.0.0.1:80,127.0.0.1:5555,cubic,0,10,,,,,\n",                # loopback: a check
        "2.25,10.0.100.1:5201,10.0.1.2:6000,cubic,0,10,,,NA,,\n",           # probe; NA token
    ])
    sched = SCHED_HEADER + "".join([
        "0.19,ack,acb4e316,1,10.0.100.1:80-10.0.1.2:58602,1\n",
        "0.3,ack,acb4e316,2,10.0.100.1:80-10.0.2.2:40000,1\n",
        "x,ack,acb4e316,2,10.0.100.1:80-10.0.2.2:40000,1\n",                # no time: kept, as there
        "0.5,ack,acb4e316,3,nodash,1\n",                                    # no '-': left out
        "0.6,ack,,1,,1\n",
        "1.9,ack,acb4e316,1,10.0.100.1:80-10.0.1.2:58602,1\n",
    ])
    data = _write(tmp_path, ss, sched)
    by_pandas, by_rows = _both(data, tmp_path)
    assert by_rows == by_pandas
    csv_lines = by_rows[1].splitlines()
    assert csv_lines[0] == "flow,role,mptcp_token,series,rows,first_t_s,last_t_s"
    # 6 readable ss rows over 5 flows (two spellings of one 4-tuple are one flow), 2 sched flows
    assert len(csv_lines) == 1 + 5 + 2
    assert "10.0.100.1:80-10.0.1.2:58602,workload,acb4e316,subflows.csv,2,0.2762,1.2346" in csv_lines
    assert "10.0.100.1:80-10.0.1.2:40200,check,,subflows.csv,1,0.51,0.51" in csv_lines
    assert "10.0.100.1:80-10.0.2.2:40000,workload,acb4e316,schedtrace/subflow_samples.csv,2,0.3,0.3" in csv_lines


def test_tokens_and_rows_as_documented(tmp_path: Path) -> None:
    """A row missing an endpoint names no flow (flows.read_state named it "…-nan:-1"), and the scheduler trace's token is the later one — (a pandas reader of the tokens
    once unpacked its usecols in the file's order, conn first, so the trace's tokens never reached flows.csv)."""
    data = _write(tmp_path, SS_HEADER + "0.1,10.0.100.1:80,10.0.2.2:40000,cubic,1,10,,,aaaa0001,,\n"
                                        "0.7,10.0.100.1:80,,cubic,1,24,,,,,\n",
                  SCHED_HEADER + "0.3,ack,bbbb0002,2,10.0.100.1:80-10.0.2.2:40000,1\n")
    assert flow_ids.mptcp_tokens(data) == {"10.0.100.1:80-10.0.2.2:40000": "bbbb0002"}
    by_pandas, by_rows = _both(data, tmp_path)
    assert by_rows == by_pandas and "nan" not in by_pandas[1]
    assert flow_ids.ss_flow_times(data / flow_ids.SS_SAMPLES, RULES) == [
        ("10.0.100.1:80-10.0.2.2:40000", "workload", 0.1)]


def test_missing_or_malformed_files_give_no_rows_as_the_pandas_readers(tmp_path: Path) -> None:
    data = _write(tmp_path, "t_s,local\n1,10.0.0.1:80\n",                          # no peer column
                  SCHED_HEADER + "0.1,ack,a,1,10.0.100.1:80-10.0.1.2:5,1,extra\n")  # a row too long
    by_pandas, by_rows = _both(data, tmp_path)
    assert by_rows == by_pandas
    assert by_rows[1].count("\n") == 1


def test_flow_index_counts_rows_and_skips_nan_times() -> None:
    rows = flow_ids.flow_index({"s": [("f", "workload", math.nan), ("f", "workload", 2.0), ("f", "workload", 1.0)]},
                               {"f": "t1"})
    assert rows == [{"flow": "f", "role": "workload", "mptcp_token": "t1", "series": "s", "rows": 3,
                     "first_t_s": 1.0, "last_t_s": 2.0}]
