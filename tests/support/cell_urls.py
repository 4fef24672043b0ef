"""Cell URL templates as nova 34 fills them: the unit test checks ours, the parity test asks
nova itself."""

from __future__ import annotations

DB = "postgresql+psycopg2://nova:s3cr%40t@db.example.org:5432/nova?sslmode=require#frag"
MQ = "rabbit://a:p1@[::1]:5672,b:p2@mq2:5673/vh"

#: (template, local URL, what nova 34 makes of it)
CASES: list[tuple[str, str, str]] = [
    (
        "{scheme}://{username}:{password}@{hostname}:{port}/{path}_cell1?{query}",
        DB,
        "postgresql+psycopg2://nova:s3cr%40t@db.example.org:5432/nova_cell1?sslmode=require",
    ),
    (
        "postgresql://{username}@{hostname}/cell2#{fragment}",
        DB,
        "postgresql://nova@db.example.org/cell2#frag",
    ),
    ("postgresql://nova@db/plain", DB, "postgresql://nova@db/plain"),
    ("postgresql://u:pa{ss@db/x", DB, "postgresql://u:pa{ss@db/x"),  # a literal brace: as is
    ("postgresql://{username}@h/{port}", "postgresql://u@h/db", "postgresql://u@h/None"),
    (
        "rabbit://{username1}:{password1}@[{hostname1}]:{port1},{username2}:{password2}@{hostname2}:{port2}/{path}",
        MQ,
        "rabbit://a:p1@[::1]:5672,b:p2@mq2:5673/vh",
    ),
    ("rabbit://{username}:{password}@{hostname}/", "rabbit://u:p@h1/", "rabbit://u:p@h1/"),
]
