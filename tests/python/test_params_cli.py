"""``aqmlab qdisc list|show`` and ``aqmlab cc list|show``: the engine's parameter tables."""

from __future__ import annotations

import pytest

from aqmlab.params_cli import find_kind, kinds
from conftest import run_cli


def test_tables_come_from_the_engine():
    q = {k["name"]: k for k in kinds("qdisc")}
    assert {"pfifo", "bfifo", "red", "pie", "dualpi2", "codel", "fq_codel", "cake", "lfq_cobalt"} <= set(q)
    fq = {p["name"]: p for p in q["fq_codel"]["params"]}
    assert fq["limit"]["default"] == 10240 and fq["limit"]["type"] == "1..4294967295"
    assert fq["ecn"]["default"] is True and "noecn" in fq["ecn"]["words"]
    assert fq["target"]["default_text"] == "5ms"
    c = {k["name"]: k for k in kinds("cc")}
    assert c["bbr3"]["aliases"] == ["bbr2"] and "bbr2" not in c
    assert c["reno"]["params"] == []
    assert find_kind("cc", "bbr2")["name"] == "bbr3"
    with pytest.raises(KeyError, match="unknown qdisc 'fq_kodel'.*fq_codel"):
        find_kind("qdisc", "fq_kodel")


@pytest.mark.parametrize("family,names", [("qdisc", ["pfifo", "fq_codel", "dualpi2", "twin_codel_af"]), ("cc", ["cubic", "prague", "bbr3 (bbr2)"])])
def test_list_names_every_kind_with_its_line(family, names):
    proc = run_cli(family, "list")
    assert proc.returncode == 0, proc.stderr
    for n in names:
        assert n in proc.stdout, n
    for k in kinds(family):
        assert k["doc"][:30] in proc.stdout.replace("\n", " ") or k["name"] in proc.stdout


def test_show_qdisc_prints_each_parameter_row():
    proc = run_cli("qdisc", "show", "pie")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for col in ("parameter", "default", "unit", "stack defaults"):
        assert col in out, col
    lines = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") >= 6}
    for p in kinds("qdisc")[[k["name"] for k in kinds("qdisc")].index("pie")]["params"]:
        assert p["name"] in lines, p["name"]
    assert "15ms" in lines["target"] and "1..32" in lines["alpha"] and "1/16 Hz" in lines["alpha"]


def test_show_cc_resolves_an_alias_and_shows_ranges():
    proc = run_cli("cc", "show", "bbr2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("bbr3") or "bbr3:" in proc.stdout
    assert "probe_rtt_win" in proc.stdout and "0..255" in proc.stdout
    reno = run_cli("cc", "show", "reno")
    assert reno.returncode == 0 and "no parameters" in reno.stdout


def test_show_unknown_is_bad_input():
    proc = run_cli("cc", "show", "vegas")
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("aqmlab: unknown congestion control 'vegas' (known: reno, cubic")
    assert proc.stdout == ""


def test_show_prints_per_stack_defaults():
    prague = {p["name"]: p for p in find_kind("cc", "prague")["params"]}
    assert prague["rtt_target"]["stack_defaults"] == {"l4steam-2020": "15ms", "l4steam-2020-04": "15ms"}
    assert prague["classic_ecn_detection"]["stack_defaults"] == {"l4steam-2020-04": 1}
    proc = run_cli("cc", "show", "prague")
    assert proc.returncode == 0, proc.stderr
    assert "l4steam-2020: 15ms" in proc.stdout and "ecn_fallback" in proc.stdout
