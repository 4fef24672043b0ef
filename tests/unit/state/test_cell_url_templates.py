"""Templated cell mapping URLs (issue #21 item 10): filled as nova 34 fills them.

nova's ``CellMapping._format_url`` fills ``{username}``, ``{password}``, ``{hostname}``,
``{port}``, ``{scheme}``, ``{query}``, ``{fragment}``, ``{path}`` (and ``{username1}`` ... for
each host of a several-host URL) from the local ``[database] connection`` or
``[DEFAULT] transport_url``. tests/parity/test_parity_cell_urls.py runs the same cases through
nova's own code.
"""

from __future__ import annotations

from typing import Any

import pytest

from asyncsched.admin.readiness import ReadyLimits, not_ready_reasons
from asyncsched.state.api import CELL0_UUID, CellURLError, format_cell_url, wanted_cells
from tests.support import health
from tests.support.cell_urls import CASES, DB


@pytest.mark.parametrize(("template", "default", "expected"), CASES)
def test_templates_are_filled_as_nova_fills_them(
    template: str, default: str, expected: str
) -> None:
    assert format_cell_url(template, default, "[database]") == expected


@pytest.mark.parametrize(
    ("template", "default"),
    [
        ("postgresql://{username}@{hostname}/x", None),  # [database] connection unset
        ("postgresql://{nosuchfield}@{hostname}/x", DB),
        ("postgresql://{password.__class__}@{hostname}/x", DB),  # never evaluated
        ("postgresql://{username[0]}@{hostname}/x", DB),
        ("postgresql://{username}@{hostname/x", DB),
    ],
)
def test_a_template_that_cannot_be_filled_is_an_error_naming_no_secret(
    template: str, default: str | None
) -> None:
    with pytest.raises(CellURLError) as info:
        format_cell_url(template, default, "[database]")
    assert "s3cr" not in str(info.value)


def row(uuid: str, name: str, url: str, disabled: bool = False) -> dict[str, Any]:
    return {"id": 1, "uuid": uuid, "name": name, "database_connection": url, "disabled": disabled}


def test_wanted_cells_fills_templates_and_names_the_unusable_ones() -> None:
    rows = [
        row(CELL0_UUID, "cell0", "{scheme}://x"),
        row("c1", "cell1", "postgresql://{username}:{password}@{hostname}/nova_cell1"),
        row("c2", "cell2", "postgresql://{username}:{secretfield}@{hostname}/nova_cell2"),
        row("c3", "cell3", ""),
        row("c4", "cell4", "{scheme}://x", disabled=True),
    ]
    cells = wanted_cells(rows, DB)
    assert set(cells.rows) == {"c1"}
    assert cells.rows["c1"]["database_connection"] == (
        "postgresql://nova:s3cr%40t@db.example.org/nova_cell1"
    )
    assert set(cells.unusable) == {"c2", "c3"}
    assert cells.unusable["c2"].startswith("cell cell2: ")


def test_an_unusable_cell_makes_the_process_not_ready_and_is_named() -> None:
    db = health.database(loaded=True, age=1.0, last_error=None)
    snapshot = health.service(
        rpc=health.rpc(connected=True, accepting=True),
        hoststate=health.host_state(
            api=db,
            cells={"c1": health.cell("cell1", age=1.0)},
            unusable_cells={"c2": "cell cell2: unknown template field {secretfield}"},
        ),
    )
    reasons = not_ready_reasons(snapshot, ReadyLimits(max_state_age=30.0), None)
    assert reasons == [
        "hoststate: cell cell2: unknown template field {secretfield}; its hosts cannot be scheduled"
    ]
