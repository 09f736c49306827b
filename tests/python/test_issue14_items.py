"""Issue 14's campaign findings, one row each, as the campaign's new user met them: the CLI on
a small scenario. Every input that aborted the process, ran for hours or produced silent
nonsense is now refused before any work: exit 2, one short line that names the key (at the
line of the table that holds it), nothing written. docs/reliability-checklist.md maps every
item of the issue to its test; the rows here are the CLI ends of the items whose validation
is tested in crates/aqmlab-sim/src/scenario.rs. Also: the tidy conversion is linear in flows.

The CLI runs in this process (``aqmlab.cli.main`` with ``sys.argv`` set): no engine starts for
a refused scenario, and a process per row would cost a second each."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BASE = """duration = "1s"
seed = 1
[bottleneck]
rate = "10Mbit"
[[flows]]
cc = "cubic"
rtt = "20ms"
"""


def _flow(extra: str) -> str:
    return f'[[flows]]\ncc = "reno"\nrtt = "20ms"\n{extra}\n'


# (issue 14 item, scenario text, key the one line must name, a further part of that line)
ROWS = [
    ("abort 1: scream count 1e9", BASE + '[[flows]]\ncc = "scream"\nrtt = "20ms"\ncount = 1000000000\n', "flows[1].count", "1..1000"),
    ("abort 1: scream count 0 (became 1)", BASE + '[[flows]]\ncc = "scream"\nrtt = "20ms"\ncount = 0\n', "flows[1].count", "1..1000"),
    ("abort 1: scream count \"x\" (became 1)", BASE + '[[flows]]\ncc = "scream"\nrtt = "20ms"\ncount = "x"\n', "flows[1].count", "1..1000"),
    ("abort 2: udp frame_rate 1e-300", BASE + '[[udp]]\nrtt = "20ms"\nframe_rate = 1e-300\n', "udp[0].frame_rate", "1e-300 frames/s"),
    ("abort 2: udp frame_rate 1e-9", BASE + '[[udp]]\nrtt = "20ms"\nframe_rate = 1e-9\n', "udp[0].frame_rate", "at most 64 MiB"),
    ("abort 3: workloads mean_interarrival 11us over 10 s",
     'duration = "10s"\n[bottleneck]\nrate = "50Mbit"\n[[workloads]]\nrtt = "20ms"\nmean_interarrival = "11us"\n', "limits.max_memory", "open transfers"),
    ("abort 4: media 10 Tbit/s, 20-byte packets, 1 us microburst",
     BASE + '[[media]]\nkind = "scream"\nrtt = "20ms"\nmax_bitrate = "10Tbit"\npacket_size = 20\nmicroburst_interval = "1us"\n', "media[0].frame_rate", "at most 64 MiB"),
    ("work: 100 Gbit/s for an hour", BASE.replace('"1s"', '"3600s"').replace("10Mbit", "100Gbit"), "limits.max_packets", "4.50e10"),
    ("work: 100,000 flows for 60 s", BASE.replace('"1s"', '"60s"') + "count = 100000\n", "limits.max_memory", "of it series"),
    ("nonsense: duplicate flow names", BASE + _flow('name = "x"') + _flow('name = "x"'), "flows[2].name", "already the name of flows[1].name"),
    ("nonsense: name \"\" twice", BASE + _flow('name = ""') + _flow('name = ""'), "flows[1].name", "must not be empty"),
    ("nonsense: name \"bottleneck\"", BASE + _flow('name = "bottleneck"'), "flows[1].name", "name of a link"),
    ("nonsense: host 65535 wrapped to the server's", BASE + _flow("host = 65535"), "flows[1].host", "out of range 0..65534"),
    ("nonsense: dctcp alpha_on_init 4294967295", BASE.replace('cc = "cubic"', 'cc = "dctcp alpha_on_init 4294967295"'), "flows[0].cc", "0..1024"),
    ("nonsense: bbr min_rtt_win 0", BASE.replace('cc = "cubic"', 'cc = "bbr min_rtt_win 0"'), "flows[0].cc", "below 1ms"),
    ("nonsense: seed 3.7 became 3", BASE.replace("seed = 1", "seed = 3.7"), "seed", "not an integer"),
    ("nonsense: 1 MB qdisc string echoed whole", BASE.replace('rate = "10Mbit"', 'rate = "10Mbit"\nqdisc = "' + "x" * 1_000_000 + '"'),
     "bottleneck.qdisc", "…"),
    # "error messages quote at most a short excerpt of a bad value": numbers too (found while
    # checking this list: each of these printed 300 digits, up to 818 characters).
    ("nonsense: 1e300 frame_size_variation written out", BASE + '[[udp]]\nrtt = "20ms"\nframe_size_variation = 1e300\n',
     "udp[0].frame_size_variation", "1e300 is out of range"),
    ("nonsense: -1e-300 pacing_headroom written out", BASE + '[[media]]\nkind = "scream"\nrtt = "20ms"\npacing_headroom = -1e-300\n',
     "media[0].pacing_headroom", "-1e-300 is out of range"),
    ("nonsense: unitless rate 1e300 repeated", BASE.replace('"10Mbit"', "1e300"), "bottleneck.rate", "a unit is needed"),
    ("nonsense: dualpi2 alpha of 301 digits", BASE.replace('rate = "10Mbit"', 'rate = "10Mbit"\nqdisc = "dualpi2 alpha 1' + "0" * 300 + '"'),
     "bottleneck.qdisc", "alpha: 1e300 is out of range"),
]


def _main(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    from aqmlab import cli

    monkeypatch.setattr(sys, "argv", ["aqmlab", *args])
    with pytest.raises(SystemExit) as e:
        cli.main()
    out, err = capsys.readouterr()
    return e.value.code, out, err


@pytest.mark.parametrize("item, text, key, part", ROWS, ids=[r[0] for r in ROWS])
def test_an_issue14_input_is_refused_with_one_short_line_and_nothing_written(item, text, key, part, tmp_path, monkeypatch, capsys):
    sc = tmp_path / "s.toml"
    sc.write_text(text)
    out = tmp_path / "out"
    code, stdout, stderr = _main(["run", str(sc), "--out", str(out), "-q"], monkeypatch, capsys)
    assert code == 2, (item, code, stderr[:300])
    assert stderr.count("\n") == 1 and len(stderr.replace(str(sc), "")) < 400, (item, len(stderr), stderr[:300])
    assert f": {key}: " in stderr and part in stderr, (item, stderr)
    assert "Traceback" not in stderr and stdout == ""
    assert not out.exists(), "nothing written"


# Issue 14: "Error line numbers are wrong when a key name repeats (bottleneck.changes[0].qdisc
# reported at bottleneck.qdisc's line; flows[1].rtt at flows[0]'s)".
LINES = BASE.replace('rate = "10Mbit"', 'rate = "10Mbit"\nqdisc = "pfifo"')


@pytest.mark.parametrize(
    "item, text, key, needle",
    [
        ("lines: bottleneck.changes[0].qdisc", LINES + '[[bottleneck.changes]]\nat = "0.5s"\nqdisc = "nope"\n', "bottleneck.changes[0].qdisc", 'qdisc = "nope"'),
        ("lines: flows[1].rtt", LINES + '[[flows]]\ncc = "reno"\nrtt = "bogus"\n', "flows[1].rtt", 'rtt = "bogus"'),
    ],
)
def test_an_error_points_at_the_line_of_the_table_that_holds_the_key(item, text, key, needle, tmp_path, monkeypatch, capsys):
    sc = tmp_path / "s.toml"
    sc.write_text(text)
    line = text.splitlines().index(needle) + 1
    code, _, stderr = _main(["check", str(sc)], monkeypatch, capsys)
    assert code == 2 and stderr.count("\n") == 1, stderr
    assert f": line {line}: {key}: " in stderr, (item, line, stderr)


def test_bad_seed_option_is_one_line_not_a_box(tmp_path, monkeypatch, capsys):
    """Issue 14: "bad CLI options print a multi-line box" (here `--seed 3.7`)."""
    sc = tmp_path / "s.toml"
    sc.write_text(BASE)
    code, stdout, stderr = _main(["run", str(sc), "--seed", "3.7", "--out", str(tmp_path / "o")], monkeypatch, capsys)
    assert code == 2 and stderr.startswith("aqmlab: run: Invalid value for '--seed'"), stderr
    assert stderr.count("\n") == 1 and "╭" not in stderr and stdout == ""
    assert not (tmp_path / "o").exists()


class _Name(str):
    """A flow name that counts the comparisons made with it."""

    compares = 0

    def __eq__(self, other: object) -> bool:
        _Name.compares += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_the_tidy_conversion_is_linear_in_flows():
    """Issue 14: "the Python conversion is quadratic in flows (api._tidy calls entities.index
    per column: 20k flows take 18 s)". Counted, not timed: naming the categories of n flows
    with 2 metrics each compares names O(n) times (a list search per column: about n^2)."""
    from aqmlab.api import SeriesData

    n = 2000
    # Equal names as distinct objects, as the engine's columns have them.
    columns = [(_Name(f"f{i}"), m, "x", [float(i), 1.0]) for i in range(n) for m in ("cwnd", "srtt")]
    _Name.compares = 0
    entities, metrics, e_codes, m_codes = SeriesData.from_columns([0.0, 0.05], columns).codes()
    assert _Name.compares <= 4 * n, f"{_Name.compares} name comparisons for {n} flows"
    assert entities == [f"f{i}" for i in range(n)] and metrics == ["cwnd", "srtt"]
    assert list(e_codes[:6]) == [0, 0, 1, 1, 2, 2] and list(m_codes[:4]) == [0, 1, 0, 1]
    df = SeriesData.from_columns([0.0, 0.05], columns[:6]).tidy()
    assert list(df["flow"].astype(str)) == ["f0"] * 4 + ["f1"] * 4 + ["f2"] * 4


def test_the_plots_list_of_tcp_flows_is_linear_in_flows():
    """The plot's list of TCP flows searched a list per series key: quadratic, so a run of
    100,000 flows spent over 15 minutes in it before drawing anything. Counted, not timed."""
    from types import SimpleNamespace

    from aqmlab.plot import tcp_flows

    n = 2000
    # Transient flows (not in the summary's list) with three TCP series each.
    keys = {(_Name(f"t{i}"), m): None for i in range(n) for m in ("srtt", "cwnd", "delivery_rate")}
    result = SimpleNamespace(flows=[_Name("f0")], units=keys)
    _Name.compares = 0
    names = tcp_flows(result)
    assert names == ["f0"] + [f"t{i}" for i in range(n)]
    assert _Name.compares <= 8 * n, f"{_Name.compares} name comparisons for {n} flows"
