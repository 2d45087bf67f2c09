"""Owns: the signed-fleet part of RESULTS.md: every round with and without verification, and the goal's checks."""

from __future__ import annotations

from bench.markdown import Row, ratio, table


def signed_section(section: Row) -> list[str]:
    """The setup in one paragraph, one table of rounds side by side, then the goal line."""
    goal = section["goal"]
    lines = [
        "## Signed fleet", "",
        (f"The fleet's {section['apps']} Apps ({section['pinned_apps']} by digest, {section['tag_apps']} by tag, over "
         f"{section['artifacts']} artifacts), every one of the {section['signed_artifacts']} artifacts they extract "
         "signed with cosign's classic scheme, reconciled by ocivendir as kapp-controller runs them (one cache per "
         "App) with `OCIVENDIR_POLICY` naming a ClusterImagePolicy for all of them, and without it, round by round "
         f"interleaved; {section['online_rounds']} online round(s), then one with the registry stopped. Goal: warm "
         f"rounds with verification cost 0 extra requests and at most {section['cpu_budget']}x the CPU: "
         f"**{'MET' if goal['met'] else 'NOT MET'}** (warm CPU ratio {goal['cpu_ratio']})."), "",
    ]  # fmt: skip
    unsigned, signed = (section["variants"][name]["rounds"] for name in ("unsigned", "signed"))
    rows = [[str(plain["round"]), "up" if plain["online"] else "**stopped**", f"{plain['ok']} / {checked['ok']}",
             f"{plain['requests']} / {checked['requests']}", f"{plain['cpu_s']} / {checked['cpu_s']}",
             ratio(checked["cpu_s"], plain["cpu_s"]),
             f"{plain['wall_ms_median']} / {checked['wall_ms_median']}"]
            for plain, checked in zip(unsigned, signed, strict=True)]  # fmt: skip
    lines += table(["round", "registry", "ok (without / with)", "requests", "CPU s", "CPU ÷", "wall ms median"], rows)
    failed = [check for check in goal["checks"] if not check["met"]]
    lines += ["", *[f"- not met: {c['check']} (round {c['round']}): {c['measured']}, expected {c['expected']}"
                    for c in failed]]  # fmt: skip
    return [*lines, ""]
