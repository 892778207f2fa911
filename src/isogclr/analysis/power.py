"""Seeds allocated by power: how many seeds each claim group should run so that a budget of minutes buys the most
claims whose effect the paired t test can see.

A *claim group* is a set of training stages whose seeds go together (Table 1 on synth10, the image-text central
runs, the small-batch studies...) and the paired claims computed from them. For a claim, the effect to detect is
its **target**, max(|paper's effect|, |our observed effect|), and its spread ``sd`` is the standard deviation of
its per-seed paired differences, from the committed runs (a pilot); a claim **is detectable with n seeds** when
its minimum detectable effect (:func:`~isogclr.analysis.stats.min_detectable_effect`: 80% power, two-sided 95%)
is at most its target. A group's seeds cost ``minutes_per_seed`` each (its stages' measured minutes divided by
the seeds they ran).

:func:`allocate` (plain data in, a table out) proposes seeds per group: every group at least
:data:`SEED_FLOOR` seeds; then a greedy allocation by marginal gain per minute, in jumps: for every group, the
next seed count at which one more of its claims becomes detectable, its cost ``(n' - n) * minutes_per_seed``
and its gain (the claims that become detectable); the jump with the most claims per minute that fits in what is
left of the budget is taken, until none fits. Minutes no jump can use are left unspent (said in the table's
total). :func:`pilot_claims` builds its input from committed verdicts (:func:`claims_from_verdicts`) and
measured stage times (:func:`group_minutes`), the groups being :data:`GROUPS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import pandas as pd

from .stats import MAX_SEEDS, min_detectable_effect

SEED_FLOOR = 3  # no claim on fewer seeds (the project's rule)
CLAIM_COLUMNS = ("group", "claim", "target", "sd", "minutes_per_seed", "seeds_now")
TABLE_COLUMNS = ("group", "claims", "sd source", "seeds now", "seeds proposed", "minutes now", "minutes proposed",
                 "detectable now", "detectable proposed", "median MDE now", "median MDE proposed")


@cache
def _unit_mde(n: int) -> float:
    """The MDE of a paired t test with ``n`` seeds at sd 1 (the MDE is proportional to sd)."""
    return min_detectable_effect(1.0, n)


def mde(sd: float, n: int) -> float:
    """The minimum detectable effect at spread ``sd`` with ``n`` seeds; NaN below 2 seeds (no interval)."""
    return math.nan if n < 2 else sd * _unit_mde(n)


def seeds_to_detect(target: float, sd: float, floor: int = SEED_FLOOR, cap: int = MAX_SEEDS) -> int | None:
    """The fewest seeds n >= ``floor`` whose MDE at spread ``sd`` is at most ``target``; None beyond ``cap``."""
    for n in range(max(floor, 2), cap + 1):
        if mde(sd, n) <= target:
            return n
    return None


def _check_claims(claims: pd.DataFrame) -> None:
    missing = [c for c in CLAIM_COLUMNS if c not in claims]
    if missing:
        raise ValueError(f"claims frame lacks columns {missing} (has {list(claims.columns)})")
    for col in ("target", "sd", "minutes_per_seed"):
        bad = claims[~(claims[col].astype(float) > 0)]
        if len(bad):
            raise ValueError(f"{col} must be a positive number; rows {bad[['group', 'claim', col]].to_dict('records')}")
    per_group = claims.groupby("group")[["minutes_per_seed", "seeds_now"]].nunique()
    mixed = per_group[(per_group > 1).any(axis=1)]
    if len(mixed):
        raise ValueError(f"minutes_per_seed and seeds_now must be one value per group; groups {list(mixed.index)}")


@dataclass(frozen=True)
class _Group:
    name: str
    minutes: float  # per seed
    needs: tuple[int | None, ...]  # per claim: seeds to detect it (None: more than the cap)

    def detectable(self, n: int) -> int:
        return sum(1 for k in self.needs if k is not None and k <= n)

    def next_jump(self, n: int) -> tuple[int, int] | None:
        """(the next seed count at which a claim becomes detectable, how many do) or None."""
        later = sorted(k for k in self.needs if k is not None and k > n)
        return (later[0], later.count(later[0])) if later else None


def seeds_for_median_mde(sds: list[float], cap_mde: float, floor: int = SEED_FLOOR, cap: int = MAX_SEEDS) -> int:
    """The fewest seeds n >= ``floor`` at which the median MDE of claims with spreads ``sds`` (all on n seeds) is
    at most ``cap_mde`` (e.g. Table 1's six comparisons at most 3.5 points); a ValueError beyond ``cap`` seeds."""
    median_sd = float(pd.Series(sds, dtype=float).median())
    n = seeds_to_detect(cap_mde, median_sd, floor, cap)  # the median of sd * MDE(1, n) is median(sd) * MDE(1, n)
    if n is None:
        raise ValueError(f"a median MDE of {cap_mde} at median sd {median_sd:.3g} needs more than {cap} seeds")
    return n


def floor_minutes(claims: pd.DataFrame, floor: int = SEED_FLOOR, min_seeds: Mapping[str, int] | None = None) -> float:
    """The minutes of every group at its floor: ``floor`` seeds, or ``min_seeds[group]`` when larger."""
    per_group = claims.groupby("group", sort=False)["minutes_per_seed"].first()
    return float(sum(max(floor, (min_seeds or {}).get(g, 0)) * m for g, m in per_group.items()))


def allocate(claims: pd.DataFrame, budget_minutes: float, floor: int = SEED_FLOOR, cap: int = MAX_SEEDS,
             min_seeds: Mapping[str, int] | None = None) -> pd.DataFrame:
    """Seeds per claim group for a budget of ``budget_minutes`` (see the module docstring for the greedy rule).
    ``min_seeds`` (group -> seeds) raises a group's floor above ``floor`` (e.g. Table 1's seeds for a median MDE
    of 3.5 points: :func:`seeds_for_median_mde`).

    ``claims``: one row per claim with :data:`CLAIM_COLUMNS` (``minutes_per_seed`` and ``seeds_now`` one value
    per group; ``target`` and ``sd`` positive, in one unit per claim; an optional ``sd_source`` column is passed
    through). Returns one row per group with :data:`TABLE_COLUMNS` (MDEs: the median over the group's claims;
    NaN at fewer than 2 seeds) and a last row ``total``. A ValueError says so when the floor alone costs more
    than the budget."""
    _check_claims(claims)
    groups = {name: _Group(name, float(rows["minutes_per_seed"].iloc[0]),
                           tuple(seeds_to_detect(float(t), float(s), floor, cap)
                                 for t, s in zip(rows["target"], rows["sd"], strict=True)))
              for name, rows in claims.groupby("group", sort=False)}
    unknown = set(min_seeds or {}) - set(groups)
    if unknown:
        raise ValueError(f"min_seeds names groups with no claim: {sorted(unknown)} (groups {list(groups)})")
    seeds = {name: max(floor, (min_seeds or {}).get(name, 0)) for name in groups}
    spent = sum(seeds[name] * g.minutes for name, g in groups.items())
    if spent > budget_minutes:
        raise ValueError(f"infeasible: the floor ({floor} seeds per group"
                         + (f", {dict(min_seeds)}" if min_seeds else "") + f") costs {spent:.1f} minutes, more than "
                         f"the budget of {budget_minutes:.1f} (" + ", ".join(f"{g.name} {seeds[g.name]} x "
                                                                             f"{g.minutes:.2f}"
                                                                             for g in groups.values()) + ")")
    while True:
        jumps = []
        for name, g in groups.items():
            jump = g.next_jump(seeds[name])
            if jump is None:
                continue
            cost = (jump[0] - seeds[name]) * g.minutes
            if spent + cost <= budget_minutes:
                jumps.append((jump[1] / cost, -cost, name, jump[0]))
        if not jumps:
            break
        _, minus_cost, name, n = max(jumps)
        seeds[name], spent = n, spent - minus_cost
    rows = []
    for name, g in groups.items():
        mine = claims[claims["group"] == name]
        now, new = int(mine["seeds_now"].iloc[0]), seeds[name]
        rows.append({"group": name, "claims": len(mine),
                     "sd source": "; ".join(dict.fromkeys(mine["sd_source"])) if "sd_source" in mine else "",
                     "seeds now": now, "seeds proposed": new, "minutes now": now * g.minutes,
                     "minutes proposed": new * g.minutes, "detectable now": g.detectable(now) if now >= 2 else 0,
                     "detectable proposed": g.detectable(new),
                     "median MDE now": pd.Series([mde(s, now) for s in mine["sd"]], dtype=float).median(),
                     "median MDE proposed": pd.Series([mde(s, new) for s in mine["sd"]], dtype=float).median()})
    table = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    total = {"group": "total", "claims": table["claims"].sum(), "sd source": f"budget {budget_minutes:.1f} min, "
             f"unspent {budget_minutes - spent:.1f}", "seeds now": math.nan, "seeds proposed": math.nan,
             **{c: table[c].sum() for c in ("minutes now", "minutes proposed", "detectable now",
                                             "detectable proposed")}}
    return pd.concat([table, pd.DataFrame([total])], ignore_index=True)


# --- the pilot: committed verdicts and measured stage times ------------------------------------------------------

@dataclass(frozen=True)
class Group:
    """A claim group: the claims (``report``, a regex on the claim text), the stages that train its seeds (a regex
    on ``repro_stages.csv``'s stage names) and, for a group whose claims ran one seed, the group whose spread it
    borrows (``donor``)."""

    report: str
    claims: str
    stages: str
    donor: str | None = None


# the mini profile's paired claims by the stages whose seeds they rest on. Not here: correlation and knob claims
# (no paired mean), exact computations, feature_tsne's (an analysis of seed 0 of Table 1's runs: seeds cost no
# training there), and claims with neither a paper's nor an observed effect
GROUPS: dict[str, Group] = {
    "table1 synth10": Group("table1_unimodal", r"^Table 1: .* on synth10 \(", r":train@\w+-synth10$"),
    "table1 synth10_lt": Group("table1_unimodal", r"^Table 1: .* on synth10_lt \(", r":train@\w+-synth10_lt$"),
    "table1 fashion_mnist_mini": Group("table1_unimodal", r"(?:^Table 1: .* on fashion_mnist_mini \(|^Tables 1/3/4:|"
                                                          r"^Table 10:)", r":train_(?:real|table3)@",
                                       donor="ladder synth10_lt"),
    "ladder synth10_lt": Group("(?:budget_ladder|table1_unimodal)", r"(?:ladder_synth10_lt|^Tables 3/4: .*synth10_lt)",
                               r":study_ladder_synth10_lt@"),
    "image-text central": Group("bimodal", r"^(?:Tables 2/5/6: iSogCLR > (?:CLIP|sogclr_bimodal)|Table 7:|Figure 1)",
                                r":train_bimodal@"),
    "image-text side": Group("bimodal", r"^(?:Tables 2/5/6: iSogCLR > cyclip|Figure 7 \(right\))",
                             r":train_bimodal_side@", donor="image-text central"),
    "image-text budgets": Group("bimodal", r"^SogCLR Table 4", r":study_bimodal_epochs@", donor="image-text central"),
    "small batch": Group("small_batch", r".",
                         r":study_(?:small_batch|batch_size|standard_batch|burn_in|batch_headline(?:_steps)?)@",
                         donor="table1 synth10"),
    "ablations": Group("ablations", r".", r":study_(?:tau|tau_init|rho|gamma)@", donor="table1 synth10"),
    "emc2 convergence": Group("emc2_convergence", r".", r"^emc2_convergence_runs$", donor="table1 synth10"),
}


def claims_from_verdicts(verdicts: pd.DataFrame, groups: Mapping[str, Group] = GROUPS) -> pd.DataFrame:
    """One row per paired claim of ``groups`` in ``verdicts`` (a ``report`` column and the verdict CSVs' columns):
    group, claim, target = max(|paper_effect|, |effect|), sd and where it comes from, seeds_now.

    sd: a claim on 2 seeds or more has a minimum detectable effect ``mde`` at ``n_seeds``, proportional to the
    spread: sd = mde / MDE(sd 1, n_seeds). A one-seed claim in points borrows its group's donor's spread (the
    median sd of the donor's claims), said in ``sd_source``. Kept: claims with a target and either an ``mde`` or
    one seed and an effect in points; a claim in two groups is a ValueError."""
    rows = []
    for name, g in groups.items():
        mine = verdicts[verdicts["report"].str.fullmatch(g.report) & verdicts["claim"].str.contains(g.claims)]
        for _, v in mine.iterrows():
            target = max((abs(float(x)) for x in (v["paper_effect"], v["effect"]) if pd.notna(x)), default=math.nan)
            n = int(v["n_seeds"]) if pd.notna(v["n_seeds"]) else 0
            if not target > 0:
                continue
            if pd.notna(v["mde"]) and n >= 2:
                sd, source = float(v["mde"]) / _unit_mde(n), "pilot"
            elif n == 1 and pd.notna(v["effect"]) and " points" in str(v["evidence"]):
                sd, source = math.nan, f"borrowed from {g.donor}"
            else:
                continue
            rows.append({"group": name, "claim": v["claim"], "target": target, "sd": sd, "sd_source": source,
                         "seeds_now": n})
    out = pd.DataFrame(rows, columns=["group", "claim", "target", "sd", "sd_source", "seeds_now"])
    twice = out[out.duplicated("claim", keep=False)]
    if len(twice):
        raise ValueError(f"claims in two groups: {sorted(set(twice['claim']))}")
    for name, g in groups.items():
        borrow = (out["group"] == name) & out["sd"].isna()
        if not borrow.any():
            continue
        donor = out[(out["group"] == g.donor) & out["sd"].notna()]["sd"] if g.donor else pd.Series(dtype=float)
        if donor.empty:
            raise ValueError(f"group {name!r} has one-seed claims and its donor {g.donor!r} has no spread")
        out.loc[borrow, "sd"] = float(donor.median())
        out.loc[borrow, "sd_source"] = f"borrowed from {g.donor} (median sd of {len(donor)} claims)"
    out["seeds_now"] = out.groupby("group")["seeds_now"].transform("max")
    return out


def group_minutes(stages: pd.DataFrame, groups: Mapping[str, Group] = GROUPS) -> pd.DataFrame:
    """Per group: the stage-minutes of its stages (``stages``: ``repro_stages.csv``, columns stage and seconds)
    and which stages they are; a group that matches no stage, or a stage in two groups, is a ValueError."""
    rows, taken = [], {}
    for name, g in groups.items():
        hit = stages[stages["stage"].str.contains(g.stages)]
        if hit.empty:
            raise ValueError(f"group {name!r}: no stage matches {g.stages!r}")
        for stage in hit["stage"]:
            if stage in taken:
                raise ValueError(f"stage {stage} is in groups {taken[stage]!r} and {name!r}")
            taken[stage] = name
        rows.append({"group": name, "stages": len(hit), "stage_minutes": float(hit["seconds"].sum()) / 60})
    return pd.DataFrame(rows)


def pilot_claims(verdicts: pd.DataFrame, stages: pd.DataFrame,
                 groups: Mapping[str, Group] = GROUPS) -> pd.DataFrame:
    """:func:`allocate`'s input from committed verdicts and stage times: :func:`claims_from_verdicts` with
    ``minutes_per_seed`` = the group's stage-minutes (:func:`group_minutes`) / its seeds now (a stage's fixed
    cost, ~6 s of start-up, counted as if it grew with the seeds)."""
    claims = claims_from_verdicts(verdicts, groups)
    minutes = group_minutes(stages, groups).set_index("group")["stage_minutes"]
    claims["minutes_per_seed"] = claims["group"].map(minutes) / claims["seeds_now"]
    return claims


def seed_budget(stages: pd.DataFrame, schedule_minutes: float, slots: int,
                groups: Mapping[str, Group] = GROUPS) -> tuple[float, float]:
    """(the stage-minutes left for the groups' seeds, the stage-minutes of every other stage): ``slots`` parallel
    stages for ``schedule_minutes`` of schedule, minus the stages no group covers (data, references, tuning,
    reports...), measured in ``stages``."""
    covered = group_minutes(stages, groups)["stage_minutes"].sum()
    other = float(stages["seconds"].sum()) / 60 - covered
    return schedule_minutes * slots - other, other
