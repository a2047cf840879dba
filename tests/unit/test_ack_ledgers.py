"""`--acks` ledgers read on an executor (`jobs.decode_tasks`): a row that cannot be used is a quarantine
row at its bytes (its number in Parquet), and never costs the ledger its other rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs import decode_tasks as dt


def read(path: Path) -> tuple[list[int], list[tuple[int, int | None, str]]]:
    """(the acks' offsets, the quarantine rows' (position, length, message))."""
    unit = dt.WorkUnit(dt.ACKS_LEDGER, "d", None, None, None, str(path), path.stat().st_size)
    acks = [row["offset"] for row in dt._acks_rows(unit, "acks")]
    bad = [(row["position"], row["length"], row["message"]) for row in dt._acks_rows(unit, "quarantine")]
    return acks, bad


def ack(offset: Any, **more: Any) -> str:
    return json.dumps({"topic": "t", "partition": 0, "offset": offset, **more})


def test_json_lines_that_python_cannot_take_are_bad_rows_and_the_others_are_kept(tmp_path: Path) -> None:
    lines = [
        ack(1),
        '{"topic": "t", "partition": 0, "offset": ' + "9" * 5000 + "}",  # past Python's int digits
        '{"topic": "t", "partition": 0, "offset": 2, "key": ' + "[" * 100_000 + "]" * 100_000 + "}",
        ack("1_0"),  # int() would read 10
        ack("\u0663"),  # an Arabic-Indic 3
        '{"topic": ["t"], "partition": 0, "offset": 4}',
        ack(5),
    ]
    ledger = tmp_path / "acks.jsonl"
    ledger.write_text("\n".join(lines) + "\n")
    starts = [sum(len(line.encode()) + 1 for line in lines[:i]) for i in range(len(lines))]
    acks, bad = read(ledger)
    assert acks == [1, 5]
    assert [(position, message.split(":")[0]) for position, _, message in bad] == [
        (starts[i], f"acks row {i}") for i in range(1, 6)
    ]
    assert "Exceeds the limit" in bad[0][2] and bad[1][2].endswith("not JSON: nested too deeply")
    assert bad[2][2] == "acks row 3: offset '1_0' is not an integer"
    assert bad[4][2] == "acks row 5: topic ['t'] is not a string"


def test_csv_rows_the_reader_rejects_are_bad_rows_and_the_others_are_kept(tmp_path: Path) -> None:
    ledger = tmp_path / "acks.csv"
    rows = [
        "topic,partition,offset\n",
        "t,0,1\n",
        "t,0," + "9" * 140_000 + "\n",
        "t,0,3\n",
        't,0,"4\n',
        "t,0,5\n",
    ]
    ledger.write_text("".join(rows))
    starts = [sum(len(r) for r in rows[:i]) for i in range(len(rows))]
    acks, bad = read(ledger)
    # The field past csv's limit is one bad row; a quote left open is a bad row at its line only: the
    # rows after it are read again, not lost as part of one field.
    assert acks == [1, 3, 5]
    assert bad == [
        (starts[2], len(rows[2]), "acks row 1: not CSV: field larger than field limit (131072)"),
        (
            starts[4],
            len(rows[4]),
            f"acks row 3: not CSV: unexpected end of data in a row of 2 lines from here; {dt._AGAIN}",
        ),
    ]


def test_a_stray_quote_in_a_long_ledger_costs_its_row_only(tmp_path: Path) -> None:
    """Past csv's field size limit (not only at the end of the file) the open quote's row is one bad
    row and every row after it is read, blank lines, CRLF endings and further stray quotes included."""
    ledger = tmp_path / "acks.csv"
    n = 20_000  # ~230 KB after the stray quote: past the 128 KiB limit
    rows = ["topic,partition,offset\r\n"] + [f"t,0,{o}\r\n" for o in range(n)]
    rows[101] = 't,0,"100\r\n'
    rows[15_001] = 't,0,"15000\r\n'
    rows.insert(5, "\r\n")
    ledger.write_text("".join(rows), newline="")
    starts = [sum(len(r) for r in rows[:i]) for i in range(len(rows))]
    acks, bad = read(ledger)
    assert acks == [o for o in range(n) if o not in (100, 15_000)]
    assert [(position, length) for position, length, _ in bad] == [
        (starts[102], len(rows[102])),
        (starts[15_002], len(rows[15_002])),
    ]
    assert "field larger than field limit (131072) in a row of " in bad[0][2]
    assert "unexpected end of data in a row of 5000 lines from here" in bad[1][2]


def test_stray_quotes_are_read_past_while_the_lines_read_again_number_no_more_than_the_texts(
    tmp_path: Path,
) -> None:
    """Two stray quotes: each costs its row. A text whose every line opens a quote again (`x","y`: the
    quote closes, a comma, a quote opens) would be read once per line: past the bound (lines read again
    no more than the text's) its tail is one bad row, as before the lines were read again."""
    ledger = tmp_path / "acks.csv"
    rows = ["topic,partition,offset\n", "t,0,1\n", 't,0,"2\n', "t,0,3\n", 't,0,"4\n', "t,0,5\n"]
    ledger.write_text("".join(rows))
    starts = [sum(len(r) for r in rows[:i]) for i in range(len(rows))]
    acks, bad = read(ledger)
    assert acks == [1, 3, 5]
    assert [(position, length) for position, length, _ in bad] == [
        (starts[2], len(rows[2])),
        (starts[4], len(rows[4])),
    ]
    rows = ["topic,partition,offset,key\n"] + ['t,0,x","y\n'] * 50
    ledger.write_text("".join(rows))
    acks, bad = read(ledger)
    assert acks == []
    assert [(position, length, message.split(": ", 1)[1]) for position, length, message in bad] == [
        (
            len(rows[0]),
            len(rows[1]),
            f"not CSV: unexpected end of data in a row of 50 lines from here; {dt._AGAIN}",
        ),
        (len(rows[0]) + len(rows[1]), len(rows[1]) * 49, "not CSV: unexpected end of data"),
    ]


def test_a_quoted_field_over_lines_is_still_one_row(tmp_path: Path) -> None:
    """A quote closed on a later line is a field of several lines, as CSV has it: one row."""
    ledger = tmp_path / "acks.csv"
    rows = ["topic,partition,offset,key\n", 't,0,1,"a\n', 'b,c"\n', "t,0,2,x\n"]
    ledger.write_text("".join(rows))
    unit = dt.WorkUnit(dt.ACKS_LEDGER, "d", None, None, None, str(ledger), ledger.stat().st_size)
    assert [(r["offset"], r["key"], r["position"]) for r in dt._acks_rows(unit, "acks")] == [
        (1, "a\nb,c", 0),
        (2, "x", 1),
    ]
    assert read(ledger)[1] == []


def test_a_parquet_row_group_that_cannot_be_read_is_one_bad_region(tmp_path: Path) -> None:
    ledger = tmp_path / "acks.parquet"
    table = pa.Table.from_pylist([{"topic": "t", "partition": 0, "offset": o} for o in range(2000)])
    pq.write_table(table, ledger, row_group_size=1000, compression="none")
    data = bytearray(ledger.read_bytes())
    second = pq.ParquetFile(ledger).metadata.row_group(1).column(2)
    start = second.data_page_offset
    data[start : start + 16] = b"\xff" * 16  # the second group's offset page header
    ledger.write_bytes(bytes(data))
    acks, bad = read(ledger)
    assert acks == list(range(1000))
    assert [(position, length) for position, length, _ in bad] == [(1000, None)]
    assert bad[0][2].startswith("acks row 1000: row group 1 (to row 1999) cannot be read")


def test_a_parquet_key_that_is_not_utf8_is_left_out_and_its_ack_kept(tmp_path: Path) -> None:
    """A binary key (a UUID's bytes) cannot be compared with the records' keys as text: the ack is judged
    by its offset without it, where the whole row was refused, its offset unchecked. A topic that is
    not UTF-8 still makes the row unusable."""
    ledger = tmp_path / "acks.parquet"
    keys = [b"k0", b"k\xff", b"k2"]
    topics = [b"t", b"t", b"t\xff"]
    pq.write_table(
        pa.table({"topic": topics, "partition": [0] * 3, "offset": [0, 1, 2], "key": pa.array(keys)}),
        ledger,
    )
    unit = dt.WorkUnit(dt.ACKS_LEDGER, "d", None, None, None, str(ledger), ledger.stat().st_size)
    assert [(r["offset"], r["key"]) for r in dt._acks_rows(unit, "acks")] == [(0, "k0"), (1, None)]
    assert read(ledger)[1] == [(2, None, "acks row 2: topic is not UTF-8 (its byte 1)")]


def test_whole_numbers_written_as_floats_text_are_read(tmp_path: Path) -> None:
    """pandas writes an integer column holding a NaN as floats (`1000.0`): each such row was refused
    in CSV while the same values in JSON or Parquet were read."""
    ledger = tmp_path / "acks.csv"
    ledger.write_text("topic,partition,offset,producer_id\nt,0.0,5.0,1000.0\nt,0,6,\nt,0,7.5,1\n")
    unit = dt.WorkUnit(dt.ACKS_LEDGER, "d", None, None, None, str(ledger), ledger.stat().st_size)
    rows = [(r["partition"], r["offset"], r["producer_id"]) for r in dt._acks_rows(unit, "acks")]
    assert rows == [(0, 5, 1000), (0, 6, None)]
    assert [m for _, _, m in read(ledger)[1]] == ["acks row 2: offset '7.5' is not an integer"]


def test_a_timestamp_in_another_unit_than_milliseconds_is_a_bad_row_not_an_ack_after_the_dump(
    tmp_path: Path,
) -> None:
    """Microseconds read as milliseconds put an ack some 50,000 years after the dump, where the audit
    judges none; a Parquet timestamp column holding them failed the rest of its row group in Python's
    datetime. Dates and timestamps of every unit are read as the millisecond they name."""
    import datetime as dt_

    text = tmp_path / "acks.jsonl"
    text.write_text(
        "".join(ack(o, timestamp=t) + "\n" for o, t in ((1, 1_714_557_600_123), (2, 1_714_557_600_123_456)))
    )
    unit = dt.WorkUnit(dt.ACKS_LEDGER, "d", None, None, None, str(text), text.stat().st_size)
    assert [(r["offset"], r["timestamp"]) for r in dt._acks_rows(unit, "acks")] == [(1, 1_714_557_600_123)]
    assert read(text)[1][0][2].startswith("acks row 1: timestamp 1714557600123456 is past the year 9999")
    ledger = tmp_path / "acks.parquet"
    ms = 1_704_067_201_500
    pq.write_table(
        pa.table(
            {
                "topic": ["t"] * 3,
                "partition": [0] * 3,
                "offset": [0, 1, 2],
                "timestamp": pa.array([ms, ms * 1000, ms], pa.timestamp("ms")),
                "day": pa.array([dt_.date(2024, 1, 1)] * 3, pa.date32()),
                "seconds": pa.array([ms // 1000] * 3, pa.timestamp("s", tz="UTC")),
                "nanos": pa.array([ms * 1_000_000] * 3, pa.timestamp("ns")),
            }
        ),
        ledger,
    )
    acks, bad = read(ledger)
    assert acks == [0, 2]
    assert [(p, m.split(":")[0]) for p, _, m in bad] == [(1, "acks row 1")]
    batch = next(pq.ParquetFile(ledger).iter_batches())
    row = dt._times_as_ms(batch).to_pylist()[0]
    assert (row["day"], row["seconds"], row["nanos"]) == (1_704_067_200_000, ms - 500, ms)


def test_a_parquet_ledger_numbers_its_rows_past_a_row_group_it_cannot_read(tmp_path: Path) -> None:
    """The first group unreadable: the second group's rows are rows 1000-1999, not 1-1000."""
    ledger = tmp_path / "acks.parquet"
    table = pa.Table.from_pylist([{"topic": "t", "partition": 0, "offset": o} for o in range(2000)])
    pq.write_table(table, ledger, row_group_size=1000, compression="none")
    data = bytearray(ledger.read_bytes())
    first = pq.ParquetFile(ledger).metadata.row_group(0).column(2).data_page_offset
    data[first : first + 16] = b"\xff" * 16
    ledger.write_bytes(bytes(data))
    unit = dt.WorkUnit(dt.ACKS_LEDGER, "d", None, None, None, str(ledger), ledger.stat().st_size)
    rows = list(dt._acks_rows(unit, "acks"))
    assert [(r["position"], r["offset"]) for r in rows] == [(o, o) for o in range(1000, 2000)]
    assert read(ledger)[1][0][2].startswith("acks row 0: row group 0 (to row 999) cannot be read")


def test_a_timestamp_as_a_point_in_time_and_a_decimal_offset_are_read_not_refused(tmp_path: Path) -> None:
    """pandas' `to_parquet` writes a datetime64 column as a Parquet timestamp, a JDBC export a
    decimal(20, 0): each row was refused whole, its offset unchecked. ISO 8601 text is read too; a time
    with no zone is UTC. Text that is neither a number nor a time is still a bad row."""
    import datetime as dt_
    import decimal

    when = dt_.datetime(2024, 1, 1, 0, 0, 1, 500000)
    ms = 1_704_067_201_500
    ledger = tmp_path / "acks.parquet"
    pq.write_table(
        pa.table(
            {
                "topic": ["t"] * 2,
                "partition": [0, 0],
                "offset": pa.array([decimal.Decimal(7), decimal.Decimal(8)], pa.decimal128(20, 0)),
                "timestamp": pa.array([when, when.replace(tzinfo=dt_.UTC)], pa.timestamp("us")),
            }
        ),
        ledger,
    )
    unit = dt.WorkUnit(dt.ACKS_LEDGER, "d", None, None, None, str(ledger), ledger.stat().st_size)
    assert [(r["offset"], r["timestamp"]) for r in dt._acks_rows(unit, "acks")] == [(7, ms), (8, ms)]
    text = tmp_path / "acks.jsonl"
    text.write_text(
        "\n".join(
            [
                ack(1, timestamp="2024-01-01T00:00:01.5Z"),
                ack(2, timestamp="2024-01-01T01:00:01.5+01:00"),
                ack(3, timestamp="2024-01-01 00:00:01.500"),
                ack(4, timestamp="yesterday"),
            ]
        )
        + "\n"
    )
    unit = dt.WorkUnit(dt.ACKS_LEDGER, "d", None, None, None, str(text), text.stat().st_size)
    assert [(r["offset"], r["timestamp"]) for r in dt._acks_rows(unit, "acks")] == [(1, ms), (2, ms), (3, ms)]
    assert read(text)[1][0][2] == "acks row 3: timestamp 'yesterday' is not an integer"


def test_a_csv_ledger_after_blank_lines_with_spaces_after_its_commas_is_read(tmp_path: Path) -> None:
    """`csv` took a blank first line for a header of no names (every row "no topic"), and `t, 0, 1`
    for topic ` t`, which names no dumped partition. A bad row's bytes are still where they are."""
    ledger = tmp_path / "acks.csv"
    rows = ["\n", "  \n", "topic, partition, offset\n", "t, 0, 1\n", "t, 0, x\n", "t, 0, 3\n"]
    ledger.write_text("".join(rows))
    unit = dt.WorkUnit(dt.ACKS_LEDGER, "d", None, None, None, str(ledger), ledger.stat().st_size)
    assert [(r["topic"], r["offset"]) for r in dt._acks_rows(unit, "acks")] == [("t", 1), ("t", 3)]
    start = sum(len(r) for r in rows[:4])
    assert read(ledger)[1] == [(start, len(rows[4]), "acks row 1: offset 'x' is not an integer")]


def test_a_json_key_with_a_lone_surrogate_is_a_bad_row_and_the_ledger_keeps_its_other_rows(
    tmp_path: Path,
) -> None:
    """`json.dumps` writes a key read with surrogateescape as `\\udcff`; JSON reads it back, UTF-8 cannot
    hold it. It failed the Arrow batch of the whole ledger: no acks, one UNREADABLE_FILE warning."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from schemas.tables import ACKS

    lines = [ack(1), ack(2, key="\udcff"), ack(3, app_producer="a\ud800")]
    ledger = tmp_path / "acks.jsonl"
    ledger.write_text("\n".join(lines) + "\n")
    assert "\\udcff" in lines[1]
    unit = dt.WorkUnit(dt.ACKS_LEDGER, "d", None, None, None, str(ledger), ledger.stat().st_size)
    stream = dt.decode_unit_safely(unit, ACKS.name, to_arrow_schema(ACKS.schema), records=False)
    offsets: list[int] = []
    while True:
        try:
            offsets += next(stream).column("offset").to_pylist()
        except StopIteration as done:
            assert done.value is True
            break
    assert offsets == [1]
    start = len(lines[0]) + 1
    assert read(ledger)[1] == [
        (start, len(lines[1]) + 1, "acks row 1: key is not UTF-8 (a lone surrogate at its character 0)"),
        (
            start + len(lines[1]) + 1,
            len(lines[2]) + 1,
            "acks row 2: app_producer is not UTF-8 (a lone surrogate at its character 1)",
        ),
    ]


def test_a_csv_ledger_whose_quoted_names_follow_comma_space_passes_the_header_check(tmp_path: Path) -> None:
    """The header check read `"topic", "partition"` without skipping the space, so the second name was
    ` "partition"` with its quotes: "lacks column(s) partition, offset", exit 2, for rows that read."""
    from jobs.ingest import check_ledger

    ledger = tmp_path / "acks.csv"
    ledger.write_text('"topic", "partition", "offset"\n"t", 0, 1\n"t", 0, 2\n')
    assert dt.ledger_columns(str(ledger)) == ["topic", "partition", "offset"]
    check_ledger(str(ledger))
    assert read(ledger) == ([1, 2], [])


def test_partition_directories_count_below_the_ledger_directory_only(tmp_path: Path) -> None:
    """A file given alone in a directory named `key=prod` gives its acks no key (an unrelated directory
    read as a column made every ack's key "prod"); below a ledger directory a null partition value,
    as Hive names it, is a null; a timestamp written as a float's text is not read as an ISO date."""
    alone = tmp_path / "key=prod" / "acks.parquet"
    alone.parent.mkdir()
    pq.write_table(pa.table({"topic": ["t"], "partition": [0], "offset": [1]}), alone)
    assert dt._partition_values(str(alone), None) == {}
    assert [
        r["key"]
        for r in dt._acks_rows(dt.WorkUnit(dt.ACKS_LEDGER, "d", None, None, None, str(alone), 1), "acks")
    ] == [None]
    root = tmp_path / "key=prod" / "table"
    part = root / "topic=t" / "producer_id=__HIVE_DEFAULT_PARTITION__" / "part-0.parquet"
    part.parent.mkdir(parents=True)
    pq.write_table(pa.table({"partition": [0], "offset": [2]}), part)
    assert dt._partition_values(str(part), str(root)) == {"topic": "t", "producer_id": None}
    unit = dt.WorkUnit(dt.ACKS_LEDGER, "d", None, None, None, str(part), 1, ledger_root=str(root))
    assert [(r["topic"], r["producer_id"], r["key"]) for r in dt._acks_rows(unit, "acks")] == [
        ("t", None, None)
    ]
    assert dt._epoch_ms("1701011200000.0") == "1701011200000.0"


def test_a_programs_csv_keeps_a_keys_leading_space(tmp_path: Path) -> None:
    """Python's `csv` and pandas write a key's leading space as it is, unquoted. Read skipping the space
    after every comma, the key ` k1` was `k1`: another record's key, an overwritten record (critical).
    Spaces after the commas are skipped only where the header has them, as a ledger written by hand."""
    import csv

    ledger = tmp_path / "acks.csv"
    with ledger.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["topic", "partition", "offset", "key"])
        writer.writerows([["t", 0, 1, " k1"], ["t", 0, 2, "  "], ["t", 0, 3, "k3"]])
    unit = dt.WorkUnit(dt.ACKS_LEDGER, "d", None, None, None, str(ledger), ledger.stat().st_size)
    keys = [(r["offset"], r["key"]) for r in dt._acks_rows(unit, "acks")]
    assert keys == [(1, " k1"), (2, "  "), (3, "k3")]
    spaced = tmp_path / "spaced.csv"
    spaced.write_text('topic, partition, offset, key\nt, 0, 1, k1\nt, 0, 2, "a, b"\n')
    unit = dt.WorkUnit(dt.ACKS_LEDGER, "d", None, None, None, str(spaced), spaced.stat().st_size)
    assert [(r["offset"], r["key"]) for r in dt._acks_rows(unit, "acks")] == [(1, "k1"), (2, "a, b")]


def test_a_csv_headers_quoted_comma_is_no_space_after_a_comma_and_a_spaced_quote_is_read_as_quoted(
    tmp_path: Path,
) -> None:
    """A program's header may quote a name holding ", ": its rows are still read as written (` k1`). A
    row written `t, 0, 3, "a, b"` under a header without spaces opens a quote after a space, which no
    writer leaves in an unquoted field: it is read again skipping the spaces (read as written, its key
    was ` "a` and ` b"` a field past the header's)."""
    ledger = tmp_path / "acks.csv"
    ledger.write_text(
        'topic,partition,offset,key,"note, free text"\n'
        "t,0,1, k1,x\n"
        't, 0, 2, " k2", y\n'
        't, 0, 3, "a, b", z\n'
        "t,0,4,plain\n"
    )
    unit = dt.WorkUnit(dt.ACKS_LEDGER, "d", None, None, None, str(ledger), ledger.stat().st_size)
    assert [(r["offset"], r["key"]) for r in dt._acks_rows(unit, "acks")] == [
        (1, " k1"),
        (2, " k2"),
        (3, "a, b"),
        (4, "plain"),
    ]
    assert read(ledger)[1] == []


def test_a_json_ledger_whose_first_row_is_torn_or_incomplete_keeps_its_other_rows(tmp_path: Path) -> None:
    """The columns were judged from the first line alone: a torn first row (a ledger written while the
    process died, then appended to) or one without an offset refused the whole ledger (exit 2), though
    the same row on line 2 is one quarantined row. The first lines are read up to one with every
    column; a file with no JSON object in them is still refused."""
    from jobs.ingest import UsageError, check_ledger

    for first in ('{"topic": "t", "partit', json.dumps({"topic": "t", "partition": 0})):
        ledger = tmp_path / "acks.jsonl"
        ledger.write_text("\n".join([first, ack(1), ack(2)]) + "\n")
        check_ledger(str(ledger))
        acks, bad = read(ledger)
        assert acks == [1, 2]
        assert [(position, message.split(":")[0]) for position, _, message in bad] == [(0, "acks row 0")]
    ledger.write_text('{"topic": "t"\n[1, 2]\n')
    with pytest.raises(UsageError, match="first line is not JSON"):
        check_ledger(str(ledger))
    ledger.write_text(json.dumps({"topic": "t", "partition": 0}) + "\n")
    with pytest.raises(UsageError, match=r"lacks column\(s\) offset"):
        check_ledger(str(ledger))
