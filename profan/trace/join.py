"""Joining op executions to the HLO that ran: each row's module key and whether its op is an
instruction of that module, counted per reason when it is not.

The join works on the distinct (program id, module, op name) triples (a few hundred on a host of
half a million rows), found from the columns' category codes: no string is hashed per row.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from profan.hlo.model import Module
from profan.trace.command_buffers import UNATTRIBUTED, UNATTRIBUTED_NAME
from profan.trace.planes import PROGRAM_NA, Coded


def as_category(values: np.ndarray) -> pd.Categorical:
    """An object array (strings, None for missing) as the categorical ``astype("category")``
    makes of it (categories sorted, of the dtype pandas infers), with one factorize."""
    codes, uniques = pd.factorize(values, sort=True)
    return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(pd.Index(uniques)))


def coded_category(column: Coded, order: np.ndarray) -> pd.Categorical:
    """``as_category(column.objects()[order])`` from the codes: the few values sorted, the rows'
    codes renumbered (no string is hashed per row).  Values that are not all strings go the
    long way."""
    used = column.used()
    if not all(type(value) is str for value in used):
        return as_category(column.objects()[order])
    ranked = sorted(range(len(used)), key=used.__getitem__)
    renumber = np.full(len(column.values) + 1, -1, dtype=np.int64)  # the last: code -1 stays
    index = {value: code for code, value in enumerate(column.values)}
    for rank, position in enumerate(ranked):
        renumber[index[used[position]]] = rank
    categories = pd.Index(np.array([used[position] for position in ranked], dtype=object))
    return pd.Categorical.from_codes(
        renumber[column.codes[order]], dtype=pd.CategoricalDtype(categories)
    )


def spread_category(values: np.ndarray, rows: np.ndarray) -> pd.Categorical:
    """``as_category(values[rows])`` built from the few ``values`` (every one of them is used by
    some row): the categories from the small array, the rows by their codes."""
    small = as_category(values)
    return pd.Categorical.from_codes(small.codes[rows], dtype=small.dtype)


def _appearance(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes renumbered in order of first appearance (what ``pd.factorize`` of the values
    gives), and the original code of each."""
    return pd.factorize(codes)


def join_ops(
    frame: pd.DataFrame,
    modules: dict[str, Module],
    keys_by_program: dict[int, str],
    keys_by_name: dict[str, list[str]],
    module_names: dict[int, str],
    unmatched: dict[str, Counter[str]],
    label: str = "",
) -> None:
    """Set ``module`` (filled from the program id where the event names none), ``module_key``
    and ``matched`` of a reader frame whose string columns are categorical; count what does not
    join, per reason, with examples (in the order the triples first appear)."""
    program = frame["program_id"].to_numpy()
    module = frame["module"].array
    missing_name = module.codes < 0
    if missing_name.any():
        filled = np.asarray(module, dtype=object)
        filled[missing_name] = [
            module_names.get(int(p)) if p != PROGRAM_NA else None for p in program[missing_name]
        ]
        frame["module"] = module = as_category(filled)
    # Distinct (program, module, op) triples, each part numbered by first appearance (NA is a
    # value of its own); the codes are combined in place (each full-length temporary is
    # megabytes on a big host).
    combined, program_values = pd.factorize(program)
    combined = combined.astype(np.int64, copy=False)
    module_rank, module_codes = _appearance(module.codes)
    combined *= len(module_codes) + 1
    combined += module_rank
    del module_rank
    op_name = frame["op_name"].array
    op_rank, op_codes = _appearance(op_name.codes)
    combined *= len(op_codes) + 1
    combined += op_rank
    del op_rank
    codes, unique_combined = pd.factorize(combined, sort=True)
    del combined
    op_part = unique_combined % (len(op_codes) + 1)
    module_part = (unique_combined // (len(op_codes) + 1)) % (len(module_codes) + 1)
    program_part = unique_combined // ((len(op_codes) + 1) * (len(module_codes) + 1))

    def texts(categorical: pd.Categorical, original: np.ndarray) -> list[str]:
        names = categorical.categories
        return ["\x00" if code < 0 else names[code] for code in original]

    module_texts, op_texts = texts(module, module_codes), texts(op_name, op_codes)
    uniques = [
        (program_values[p], module_texts[m], op_texts[o])
        for p, m, o in zip(program_part, module_part, op_part, strict=True)
    ]
    names_cache: dict[str, set[str]] = {}
    keys = np.empty(len(uniques), dtype=object)
    matched = np.zeros(len(uniques), dtype=bool)
    reasons: list[str | None] = [None] * len(uniques)
    for index, (program_id, module_name, op) in enumerate(uniques):
        module_name = None if module_name == "\x00" else module_name
        op = None if op == "\x00" else op
        key, reason = module_key(
            int(program_id), module_name, modules, keys_by_program, keys_by_name
        )
        keys[index] = key
        if key is not None and op is not None:
            if key not in names_cache:
                names_cache[key] = _instruction_names(modules[key])
            if op in names_cache[key]:
                matched[index] = True
                continue
            reason = (
                UNATTRIBUTED if UNATTRIBUTED_NAME.match(op) else "op not found in its module's HLO"
            )
        elif op is None:
            reason = "event without an op name"
        reasons[index] = (reason or "unknown") + label
    frame["module_key"] = spread_category(keys, codes)
    frame["matched"] = matched[codes]
    counts = np.bincount(codes, minlength=len(uniques))
    for index, reason in enumerate(reasons):
        if reason is None:
            continue
        program_id, module_name, op = uniques[index]
        where = module_name if module_name != "\x00" else f"program {program_id}"
        unmatched[reason][f"{where}/{op}"] += int(counts[index])


def _instruction_names(module: Module) -> set[str]:
    return {i.name for c in module.computations for i in c.instructions}


def module_key(
    program_id: int,
    module_name: str | None,
    modules: dict[str, Module],
    keys_by_program: dict[int, str],
    keys_by_name: dict[str, list[str]],
) -> tuple[str | None, str | None]:
    """The key into ``modules`` of an event's program (by id, else by module name), or why
    there is none."""
    if program_id != PROGRAM_NA and program_id in keys_by_program:
        key = keys_by_program[program_id]
        if key in modules:
            return key, None
    if module_name is None:
        if program_id == PROGRAM_NA:
            return None, "event names neither a module nor a program id"
        return None, "no HLO for the event's program id"
    candidates = [k for k in keys_by_name.get(module_name, []) if k in modules]
    if len(candidates) == 1:
        return candidates[0], None
    if len(candidates) > 1:
        return None, "module name matches several programs and the event has no program id"
    return None, "no HLO for the event's module"
